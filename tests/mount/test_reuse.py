#!/usr/bin/env python3
"""Files that come back as they were read are not read again: a directory of
documents moved out of the source and back in (under its name or another)
takes the results the saved cache holds for them, checked against each
file's size, mtime, inode and ctime; a file changed meanwhile, even with
its size and mtime put back, is read again. `status` counts the files not
read (watch_reused:), and the view ends equal to `imatch scan`.

    test_reuse.py IMATCHFS IMATCH [TEST...]
    test_reuse.py --list
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (Skip, by_doc_documents, by_doc_path, check,  # noqa: E402
                  cluster_sets, fmt_clusters, live_when, poll, read_status,
                  run_tests, scan, status_int, write)

TESTS = {}

FAMILIES = 60  # two near-duplicates each: 120 documents in big/
# Whitespace adds no term: the first file of each family is padded, so
# that another text fits in its size.
PAD = b'\n' * 4096


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def families(w, top):
    """FAMILIES pairs of near-duplicates under SOURCE/@top; the texts of
    the a- files, by name."""
    texts = {}
    for i in range(FAMILIES):
        t = w.corpus.document()
        a = os.path.join(w.src, top, 'a%02d.txt' % i)
        write(a, t.encode() + PAD)
        write(os.path.join(w.src, top, 'b%02d.txt' % i), w.corpus.near_duplicate(t))
        texts[os.path.basename(a)] = t
    return texts


def rewrite_keeping_stamp(path, text):
    """Give @path another text of exactly its size, then its mtime back:
    only its ctime tells (and the bytes)."""
    st = os.stat(path)
    data = text.encode()
    check(len(data) <= st.st_size, 'the new text does not fit in %s' % path)
    with open(path, 'r+b') as f:
        f.write(data + b'\n' * (st.st_size - len(data)))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    check((after.st_size, after.st_mtime_ns, after.st_ino)
          == (st.st_size, st.st_mtime_ns, st.st_ino),
          '%s: size, mtime or inode moved' % path)


def check_view(w):
    """The view settles to `imatch scan` and to the source's documents."""
    want = scan(w.imatch, w.src)

    def same():
        st = read_status(w.mnt)
        got = cluster_sets(w.mnt)
        return (got == want and st.get('converged') == 'yes',
                'view:\n%s\nimatch scan:\n%s' % (fmt_clusters(got), fmt_clusters(want)))
    live_when(w, lambda st: True, 'the view to be live')
    poll(same, 'the view to equal imatch scan')
    docs = by_doc_documents(w.mnt)
    want_docs = {os.path.relpath(os.path.join(d, f), w.src)
                 for d, _, fs in os.walk(w.src) for f in fs}
    check(docs == want_docs, 'by-doc/ lacks %s and has %s besides the source'
          % (sorted(want_docs - docs), sorted(docs - want_docs)))


def out_and_back(w, back):
    """Move big/ out of the source and back as @back, a file of it changed
    meanwhile with its size and mtime kept; return how many files the
    watcher did not read again."""
    texts = families(w, 'big')
    write(os.path.join(w.src, 'other', 'note.txt'), w.corpus.document())
    total = 2 * FAMILIES + 1
    d = w.daemon()
    # The results are in the saved cache once the first scan saved it.
    st = live_when(w, lambda st: status_int(st, 'documents') == total
                   and (status_int(st, 'saves') or 0) >= 1,
                   '%d documents and a saved cache' % total)
    before = status_int(st, 'watch_reused')
    check(before is not None, 'status has no watch_reused: field')
    away = os.path.join(w.top, 'away')
    os.rename(os.path.join(w.src, 'big'), away)
    live_when(w, lambda st: status_int(st, 'documents') == 1,
              'the moved-out documents to leave the view')
    # a00 takes the text of a01, so joins that family: only a read tells.
    rewrite_keeping_stamp(os.path.join(away, 'a00.txt'), texts['a01.txt'])
    os.makedirs(os.path.dirname(os.path.join(w.src, back)), exist_ok=True)
    os.rename(away, os.path.join(w.src, back))
    live_when(w, lambda st: status_int(st, 'documents') == total,
              'the documents to come back')
    check_view(w)
    st = read_status(w.mnt)
    reused = status_int(st, 'watch_reused') - before
    d.umount()
    return reused


def check_all_but_one_reused(w, back_as):
    """big/ moved out and back as @back_as: each file but the rewritten
    one is taken as it was read."""
    reused = out_and_back(w, back_as)
    check(reused == 2 * FAMILIES - 1,
          '%d files taken from the cache; %d came back unchanged'
          % (reused, 2 * FAMILIES - 1))


@test
def test_dir_back_under_its_name(w):
    """big/ moved out and back as big/: each file but the rewritten one
    keeps its result; the rewritten one joins its new family."""
    check_all_but_one_reused(w, 'big')


@test
def test_dir_back_under_another_name(w):
    """big/ moved out and back as other/returned/: found by inode and name
    in the cache, as a restart finds a renamed directory's files."""
    check_all_but_one_reused(w, 'other/returned')


@test
def test_chmod_unreadable_to_its_owner(w):
    """A chmod that leaves others read permission but takes the owner's,
    on a file the daemon's user owns, makes it unreadable to the daemon
    (the owner's bits are the ones that apply): it is read again, fails
    and leaves the view, as after chmod 000; so does another's file of the
    daemon's group whose group may not read it; nor is it taken from a cache
    a daemon that could read it saved. As root the daemon runs
    without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv), so that
    modes bind it; the files are its user's."""
    wrap = ()
    if os.geteuid() == 0:
        if not shutil.which('setpriv'):
            raise Skip('running as root and setpriv is missing: cannot make a file unreadable')
        wrap = ('setpriv', '--bounding-set', '-dac_override,-dac_read_search',
                '--inh-caps', '-dac_override,-dac_read_search', '--')
    families(w, 'docs')
    victim = os.path.join('docs', 'a00.txt')
    path = os.path.join(w.src, victim)
    d = w.daemon(wrap=wrap)
    live_when(w, lambda st: status_int(st, 'documents') == 2 * FAMILIES,
              '%d documents' % (2 * FAMILIES))
    check(os.path.isdir(by_doc_path(w.mnt, victim)), 'by-doc/%s missing at first' % victim)
    os.chmod(path, 0o004)
    try:
        open(path, 'rb').close()
        readable = True
    except PermissionError:
        readable = False
    if readable and not wrap:
        raise Skip('this user reads a mode-0004 file it owns')
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, victim)),
         'by-doc/%s to go after chmod 0004 (unreadable to its owner)' % victim)
    os.chmod(path, 0o644)
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, victim)),
         'by-doc/%s to come back after chmod 644' % victim)
    # Another's file in the daemon's group: the group's bits apply.
    other = os.path.join('docs', 'b00.txt')
    opath = os.path.join(w.src, other)
    if os.geteuid() == 0:
        os.chown(opath, 65534, os.getegid())
        os.chmod(opath, 0o404)
        poll(lambda: not os.path.lexists(by_doc_path(w.mnt, other)),
             'by-doc/%s to go after chmod 0404 (unreadable to its group)' % other)
        os.chown(opath, os.geteuid(), os.getegid())
        os.chmod(opath, 0o644)
        poll(lambda: os.path.isdir(by_doc_path(w.mnt, other)),
             'by-doc/%s to come back after chmod 644' % other)
    d.umount()
    d.check_log(allow=[r'[ab]00\.txt', r'[Pp]ermission denied'])
    # Saved by a daemon that read it (as root, with its capabilities), the
    # cache fits the file; one bound by modes must still not take it.
    if wrap:
        os.chmod(path, 0o004)
        d = w.daemon()
        live_when(w, lambda st: status_int(st, 'documents') == 2 * FAMILIES
                  and (status_int(st, 'saves') or 0) >= 1,
                  '%d documents and a saved cache' % (2 * FAMILIES))
        d.umount()
        d = w.daemon(wrap=wrap)
        live_when(w, lambda st: status_int(st, 'documents') == 2 * FAMILIES - 1
                  and status_int(st, 'errors') == 1,
                  '%d documents and an error' % (2 * FAMILIES - 1))
        check(not os.path.lexists(by_doc_path(w.mnt, victim)),
              'by-doc/%s shown from the cache, unreadable' % victim)
        d.umount()
        d.check_log(allow=[r'[ab]00\.txt', r'[Pp]ermission denied'])


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
