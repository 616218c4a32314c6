#!/usr/bin/env python3
"""The daemon keeps 8-byte prefixes of the signatures in memory and the
whole ones on disk (fs/fullsigs.h): by-doc/PATH/signatures must still show
the whole signatures, as `imatch sign` computes them, whether they come from
memory (just signed), from the state cache (after a save, after a restart)
or were carried over by a rename.

    test_fullsigs.py IMATCHFS IMATCH [TEST...]
    test_fullsigs.py --list
"""

import os
import shutil
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (by_doc_path, check, live_when, make_tree, poll,  # noqa: E402
                  read_status, run_tests, status_int, write)
from test_mount import settled, state_lexicon  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def cli_sigs(w, docs):
    """{path: [sig or '-', ...]} from `imatch sign` with the daemon's
    lexicon."""
    r = subprocess.run([w.imatch, 'sign', '--lexicon', state_lexicon(w)] +
                       [os.path.join(w.src, p) for p in docs],
                       capture_output=True, cwd=w.src)
    check(r.returncode == 0, 'imatch sign failed: %s' % r.stderr.decode())
    out = {}
    for line in r.stdout.decode().splitlines():
        f = line.split('\t')
        out[os.path.relpath(f[0], w.src)] = f[1:]
    return out


def view_sigs(w, rel):
    with open(by_doc_path(w.mnt, rel, 'signatures')) as f:
        return f.read().splitlines()


def check_sigs(w, docs, where):
    want = cli_sigs(w, docs)
    signed = 0
    for rel in docs:
        got = view_sigs(w, rel)
        check(got == want[rel], '%s: by-doc/%s/signatures\n  %s\nbut imatch sign\n  %s'
              % (where, rel, got, want[rel]))
        signed += sum(s != '-' for s in got)
    check(signed > len(docs), '%s: only %d signatures in %d documents'
          % (where, signed, len(docs)))


def saves(w):
    return status_int(read_status(w.mnt), 'saves') or 0


@test
def test_signatures_whole_from_memory_cache_and_renames(w):
    """Whole signatures just after signing, after the save that lets the
    ones in memory go, after a directory rename, and after a restart
    served from the cache."""
    _, docs, _ = make_tree(w.src, w.corpus)
    d = w.daemon()
    settled(w, d, len(docs))
    check_sigs(w, docs, 'first scan')
    poll(lambda: saves(w) >= 1, 'the save after the first scan')
    check_sigs(w, docs, 'after the save')
    # Renamed after the save: carried over from the cache file.
    os.rename(os.path.join(w.src, 'reports'), os.path.join(w.src, 'moved'))
    docs = [('moved' + p[len('reports'):]) if p.startswith('reports/') else p
            for p in docs]
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, 'moved')), 'moved/ in by-doc/')
    settled(w, d, len(docs))
    check_sigs(w, docs, 'after a directory rename')
    # A new document: from memory, next to the cached ones.
    new = 'notes/new-one.txt'
    write(os.path.join(w.src, new), w.corpus.document())
    docs.append(new)
    poll(lambda: os.path.exists(by_doc_path(w.mnt, new, 'signatures')),
         'the new document in by-doc/')
    settled(w, d, len(docs))
    check_sigs(w, docs, 'with a new document')
    d.umount()
    d.check_log()
    d2 = w.daemon()
    st = settled(w, d2, len(docs))
    check(status_int(st, 'cached') == len(docs), 'cached: %s after a restart, wanted %d'
          % (st.get('cached'), len(docs)))
    check_sigs(w, docs, 'after a restart from the cache')
    d2.umount()
    d2.check_log()


def rchar(d):
    with open('/proc/%d/io' % d.proc.pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith('rchar:'))


@test
def test_cache_survives_renames_and_other_options(w):
    """Directories renamed while the daemon was away: their files are taken
    from the cache by inode and name (they were all read again), with
    whole signatures, and saved under their new paths. A mount with other
    signing options signs the documents again but takes the binary files'
    results from the cache (it read them all again)."""
    _, docs, _ = make_tree(w.src, w.corpus)
    blob = b'\0' + os.urandom(4 << 20)
    for rel in ('media/a.raw', 'media/old/a-copy.raw'):
        os.makedirs(os.path.dirname(os.path.join(w.src, rel)), exist_ok=True)
        with open(os.path.join(w.src, rel), 'wb') as f:
            f.write(blob)
    d = w.daemon()
    settled(w, d, len(docs))
    d.umount()
    d.check_log()

    os.rename(os.path.join(w.src, 'reports'), os.path.join(w.src, 'moved'))
    os.rename(os.path.join(w.src, 'media'), os.path.join(w.src, 'photos'))
    docs = [('moved' + p[len('reports'):]) if p.startswith('reports/') else p
            for p in docs]
    text_bytes = sum(os.path.getsize(os.path.join(w.src, p)) for p in docs)
    for start in ('after the renames', 'after a restart'):
        d = w.daemon()
        st = settled(w, d, len(docs))
        check(status_int(st, 'cached') == len(docs), '%s: cached %s of %d documents'
              % (start, st.get('cached'), len(docs)))
        read = rchar(d)
        check(read < text_bytes + (1 << 20), '%s: the daemon read %d bytes; the '
              'documents are %d, the binaries 8 MB' % (start, read, text_bytes))
        check_sigs(w, docs, start)
        d.umount()
        d.check_log()

    d = w.daemon(opts=['k=3'])
    settled(w, d, len(docs))
    read = rchar(d)
    check(text_bytes <= read < text_bytes + (2 << 20), 'with k=3 the daemon read %d '
          'bytes: the documents (%d) again, not the 8 MB of binaries' % (read, text_bytes))
    d.umount()
    d.check_log()



def stored_zip(path, text):
    """A ZIP of one member no extractor places: a binary file, which an
    -o filter for its extension reads as text."""
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_STORED) as z:
        z.writestr('notes.dat', text)


def gate(w, ext, name, started=None):
    """An -o filter for *.EXT that waits while the file NAME (beside the
    source) exists, first making the directory STARTED if given, then reads
    like tr. Returns the option and the path of NAME."""
    hold = os.path.join(w.top, name)
    mark = 'mkdir %s; ' % started if started else ''
    return ("filter=%s:if [ -e %s ]; then %swhile [ -e %s ]; do sleep 0.05; done; fi; "
            "tr -c A-Za-z ' '" % (ext, hold, mark, hold)), hold


def held_rebuild(w, opts, dirs=('D',)):
    """A tree of DIRS (each with A.txt and B.txt), three more documents and
    Z/zz.xyz, mounted with OPTS; then a lexicon rebuild, held at Z/zz.xyz
    by a filter that waits on a file (Z/ comes after D/ in the walk, before
    m/). Returns the daemon, on its way through the rebuild, its options and
    the file that holds it (unlink it to let the rebuild go on)."""
    for sub in tuple(dirs) + ('Z',):
        os.makedirs(os.path.join(w.src, sub))
    for sub in dirs:
        for n in ('A', 'B'):
            write(os.path.join(w.src, sub, n + '.txt'), w.corpus.document())
    for i in range(3):
        write(os.path.join(w.src, 'd%d.txt' % i), w.corpus.document())
    stored_zip(os.path.join(w.src, 'Z', 'zz.xyz'), w.corpus.document())
    started = os.path.join(w.top, 'started')
    held, hold = gate(w, 'xyz', 'hold', started)
    opts = [held, 'threads=1'] + opts
    d = w.daemon(opts=opts)
    st = live_when(w, lambda st: status_int(st, 'format_filter') == 1, 'the first scan')
    lex_docs = status_int(st, 'lexicon_docs')
    write(hold, '')
    # Twice the documents the lexicon was built from: a rebuild.
    for i in range(lex_docs + 1):
        write(os.path.join(w.src, 'e%d.txt' % i), w.corpus.document())
    poll(lambda: (os.path.isdir(started), read_status(w.mnt)),
         'the rebuild to reach Z/zz.xyz', timeout=60)
    return d, opts, hold


def rename_during_rebuild(w, opts, before_release=None):
    """held_rebuild(); D is renamed E meanwhile, then the rebuild goes on.
    Its results for D/A.txt and D/B.txt find no file when they come.
    Returns the daemon, on its way through the rebuild, and its options."""
    d, opts, hold = held_rebuild(w, opts)
    os.rename(os.path.join(w.src, 'D'), os.path.join(w.src, 'E'))
    if before_release:
        before_release()
    os.unlink(hold)
    return d, opts


MOVED = ['E/A.txt', 'E/B.txt', 'd0.txt', 'e0.txt']


def moved_signed_anew(w, docs=MOVED):
    def same():
        want = cli_sigs(w, docs)
        got = {rel: view_sigs(w, rel) for rel in docs}
        return got == want, (got, want)
    poll(same, 'the moved files signed with the new lexicon', timeout=30)


@test
def test_directory_moved_during_a_rebuild_is_signed_again(w):
    """A directory renamed while a lexicon rebuild reads the tree: its files,
    whose results for the old path find no file, are read again (else they
    kept the old lexicon's signatures for good, the rename leaving their
    ctime), and an exact copy of one gets the result `imatch sign` gives,
    not the old one."""
    d, _ = rename_during_rebuild(w, [])
    # The rename during the rebuild has the watcher read its directory
    # again after it (a rescan before): done too, as a copy a scan reads
    # is not lent anything.
    live_when(w, lambda st: status_int(st, 'relexicons') == 1 and
              status_int(st, 'rescans') + status_int(st, 'rereads') >= 1 and
              st.get('converged') == 'yes', 'the rebuild and the reread after it')
    moved_signed_anew(w)
    outside = os.path.join(w.top, 'Acopy.txt')
    shutil.copy(os.path.join(w.src, 'E', 'A.txt'), outside)
    os.rename(outside, os.path.join(w.src, 'Acopy.txt'))
    live_when(w, lambda st: os.path.isdir(by_doc_path(w.mnt, 'Acopy.txt')), 'the copy')
    # Read after the copy showed: a worker counts before it applies.
    st = read_status(w.mnt)
    check(status_int(st, 'copies_reused') >= 1, 'the copy took a result: %s' % st)
    want = cli_sigs(w, ['Acopy.txt'])['Acopy.txt']
    check(view_sigs(w, 'Acopy.txt') == want and any(x != '-' for x in want),
          'the copy: by-doc signatures %s, imatch sign %s'
          % (view_sigs(w, 'Acopy.txt'), want))
    d.umount()
    d.check_log()


@test
def test_files_left_unread_by_a_rebuild_not_saved(w):
    """The same rename during a rebuild, with the one worker held by another
    file (w.abc, through a second waiting filter) so that the moved files
    still wait to be read again when the state is saved after the rebuild
    and the daemon is killed: the cache must not hold their old records,
    or the next start takes them and keeps the old signatures."""
    wait_worker, hold2 = gate(w, 'abc', 'hold2')
    saves = []

    def hold_the_worker():
        write(hold2, '')
        stored_zip(os.path.join(w.src, 'w.abc'), w.corpus.document())
        st = poll(lambda: (status_int(read_status(w.mnt), 'pending') >= 1, read_status(w.mnt)),
                  'w.abc queued')
        saves.append(status_int(st, 'saves'))
    d, opts = rename_during_rebuild(w, [wait_worker], hold_the_worker)

    def saved():
        st = read_status(w.mnt)
        return (status_int(st, 'relexicons') == 1 and status_int(st, 'saves') > saves[0]
                and status_int(st, 'pending') >= 3), st
    poll(saved, 'the save after the rebuild, with w.abc, E/A.txt and E/B.txt to read')
    d.kill()
    d.wait_exit(None)
    os.unlink(hold2)
    d.cleanup()  # the dead mount, if auto_unmount's helper has not
    # The same options: the cache is kept for them only.
    d = w.daemon(opts=opts)
    st = live_when(w, lambda st: True, 'the restart')
    check(status_int(st, 'cached') > 0, 'the restart takes the cache: %s' % st)
    moved_signed_anew(w)
    d.umount()
    d.check_log()

@test
def test_directory_moved_before_the_rebuild_walked_it(w):
    """A directory the rebuild has not walked yet (m/, after Z/ in the
    walk) renamed to a name it has walked past (C/) while the rebuild is
    held at Z/zz.xyz: the scan never asks for its files and the watcher
    moves them, unchanged. They must still be signed with the new lexicon,
    lend that to a copy, and be saved so: a rebuild expects to read every
    text (model_expect_reads())."""
    d, opts, hold = held_rebuild(w, [], dirs=('D', 'm'))
    os.rename(os.path.join(w.src, 'm'), os.path.join(w.src, 'C'))
    poll(lambda: (os.path.isdir(by_doc_path(w.mnt, 'C')), read_status(w.mnt)),
         'C/ in the view')
    os.unlink(hold)
    live_when(w, lambda st: status_int(st, 'relexicons') == 1, 'the rebuild')
    moved = ['C/A.txt', 'C/B.txt', 'd0.txt']
    moved_signed_anew(w, moved)
    outside = os.path.join(w.top, 'Acopy.txt')
    shutil.copy(os.path.join(w.src, 'C', 'A.txt'), outside)
    os.rename(outside, os.path.join(w.src, 'Acopy.txt'))
    live_when(w, lambda st: os.path.isdir(by_doc_path(w.mnt, 'Acopy.txt')), 'the copy')
    want = cli_sigs(w, ['Acopy.txt'])['Acopy.txt']
    check(view_sigs(w, 'Acopy.txt') == want,
          'the copy: by-doc signatures %s, imatch sign %s' % (view_sigs(w, 'Acopy.txt'), want))
    d.umount()
    d.check_log()
    d = w.daemon(opts=opts)
    st = live_when(w, lambda st: True, 'the restart')
    check(status_int(st, 'cached') > 0, 'the restart takes the cache: %s' % st)
    moved_signed_anew(w, moved + ['Acopy.txt'])
    d.umount()
    d.check_log()


@test
def test_failed_rebuild_keeps_the_view_and_the_cache(w):
    """A rebuild that fails before it publishes a lexicon (the lexicon
    cannot be written: a directory stands where its temporary file goes):
    the old lexicon stays, so what it had signed stays signed and saved,
    and the files that made the tree outgrow it are signed with it."""
    docs = []
    for i in range(3):
        docs.append('d%d.txt' % i)
        write(os.path.join(w.src, docs[-1]), w.corpus.document())
    d = w.daemon()
    st = live_when(w, lambda st: status_int(st, 'saves') >= 1, 'the first save')
    lex_docs = status_int(st, 'lexicon_docs')
    blocker = os.path.join(w.state, 'lexicon.tmp.%d' % d.proc.pid)
    os.mkdir(blocker)
    try:
        for i in range(2 * lex_docs + 1):
            docs.append('e%d.txt' % i)
            write(os.path.join(w.src, docs[-1]), w.corpus.document())
        st = poll(lambda: (status_int(read_status(w.mnt), 'save_errors') >= 1,
                           read_status(w.mnt)), 'a failed rebuild', timeout=60)
        s0 = status_int(st, 'saves')

        def signed_and_saved():
            st = read_status(w.mnt)
            if status_int(st, 'saves') <= s0 or status_int(st, 'pending'):
                return False, st
            want = cli_sigs(w, docs)
            got = {rel: view_sigs(w, rel) for rel in docs}
            return got == want, (got, want, st)
        _, _, st = poll(signed_and_saved,
                        'every file signed with the old lexicon and saved', timeout=60)
        check(status_int(st, 'relexicons') == 0,
              'relexicons counts lexicons built, not tries: %s' % st)
        d.umount()
    finally:
        os.rmdir(blocker)
    d.check_log(allow=['saving the lexicon', 'scanning'])
    d = w.daemon()
    st = live_when(w, lambda st: True, 'the restart')
    check(status_int(st, 'cached') == len(docs),
          'the restart takes every file from the cache: %s' % st)
    d.umount()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
