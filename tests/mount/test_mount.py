#!/usr/bin/env python3
"""Tests that mount imatchfs for real (DESIGN §2, §4, §5; issue 3).

    test_mount.py IMATCHFS IMATCH [TEST...]     run the named tests (all if none)
    test_mount.py --list                         print the test names

Each test builds a small tree of generated documents in a tmp directory,
mounts it in the foreground with auto_unmount and a private state directory,
polls the view until it shows what the test expects (deadline 30 s, ten times
that under TEST_WITH_VALGRIND=1), always unmounts, and fails on unexpected
"error"/"warning" lines in the daemon's log. Exit 77 when FUSE is unavailable.
KEEP_TMP=1 keeps each test's tmp directory.
"""

import errno
import fcntl
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (DEADLINE, DEFAULT_K, Fail, Skip, by_doc_documents, by_doc_path, check,  # noqa: E402
                  check_view_invariants, cluster_sets, encode_member,
                  expect_errno, fmt_clusters, fusermount, in_proc_mounts, is_mounted,
                  mount_minor, poll,
                  read_clusters, read_dupes, read_status, run_tests, scan,
                  status_int, write, make_tree, VALGRIND)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


# ---- Shared steps ----------------------------------------------------------------

def settled(w, d, want_docs=None):
    """Wait until status says nothing is pending and (when given) counts
    @want_docs documents; return the status."""
    def ok():
        st = read_status(w.mnt if d is None else d.mnt)
        pending = status_int(st, 'pending')
        # Text documents: "documents" may also count skipped files.
        docs = (status_int(st, 'signed') or 0) + (status_int(st, 'rejected') or 0)
        phase = st.get('phase', '')
        done = pending == 0 and not phase.startswith(('scan', 'rescan', 'lexicon', 'sign', 'start'))
        if want_docs is not None:
            done = done and docs == want_docs
        return done, st
    return poll(ok, 'status to settle (pending: 0%s)'
                % ('' if want_docs is None else ', signed + rejected: %d' % want_docs))


def wait_clusters(mnt, want, what='the clusters'):
    """Poll until the set of clusters in the view equals @want."""
    def ok():
        have = cluster_sets(mnt)
        return have == want, have
    try:
        return poll(ok, what)
    except Fail:
        have = cluster_sets(mnt)
        raise Fail('%s: the view has\n%s\nwanted\n%s' % (what, fmt_clusters(have),
                                                          fmt_clusters(want)))


def cluster_with(mnt, rel):
    for members in cluster_sets(mnt):
        if rel in members:
            return members
    return frozenset()


def standard(w):
    """The standard small tree: (expected clusters, documents, families).
    test_view_equals_scan checks the expectation against `imatch scan`, so a
    generator problem shows there first."""
    return make_tree(w.src, w.corpus)


def state_lexicon(w, state=None):
    """The lexicon file the daemon saved in its state directory."""
    state = state or w.state
    names = [n for n in os.listdir(state) if 'lexicon' in n and '.tmp' not in n]
    check(names, 'no lexicon file in the state directory: %s' % os.listdir(state))
    return os.path.join(state, sorted(names)[0])


def view_equals_scan(w, what):
    """After live changes the view still equals `imatch scan` of the tree
    with the lexicon the daemon saved (one code path, DESIGN §4)."""
    settled(w, None)
    want = scan(w.imatch, w.src, ['--lexicon', state_lexicon(w)])
    wait_clusters(w.mnt, want, 'the view to equal imatch scan --lexicon STATE/lexicon ' + what)
    check_view_invariants(w.mnt, w.src)


def wait_pair(w, a, b, what):
    """Poll until a and b are in one cluster and in each other's dupes/."""
    def ok():
        c = cluster_with(w.mnt, a)
        try:
            da, db = read_dupes(w.mnt, a), read_dupes(w.mnt, b)
        except OSError as e:
            return False, 'cluster %s; %s' % (sorted(c), e)
        return (b in c and b in da and a in db), (sorted(c), sorted(da), sorted(db))
    poll(ok, what)


# ---- The view against imatch scan ---------------------------------------------------

@test
def test_view_equals_scan(w):
    """The default mount (lexicon built from the tree) shows exactly the
    clusters `imatch scan` prints for the same tree; every document is in
    by-doc; the view's invariants hold."""
    want, docs, _ = standard(w)
    sc = scan(w.imatch, w.src)
    check(want <= sc, 'the generated near-duplicates do not cluster with imatch scan '
          '(generator or core problem):\n%s\nwanted at least\n%s'
          % (fmt_clusters(sc), fmt_clusters(want)))
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, sc, 'the view to equal imatch scan')
    check_view_invariants(w.mnt, w.src)
    have = by_doc_documents(w.mnt)
    check(have == set(docs), 'by-doc documents differ from the tree: missing %s, extra %s'
          % (sorted(set(docs) - have), sorted(have - set(docs))))
    d.umount()
    d.check_log()


@test
def test_first_scan_waits_for_two_documents(w):
    """One document is too few for a lexicon: the daemon says
    waiting-for-documents and shows what imatch scan shows of such a tree,
    exact copies only (here of a binary file), live: a copy made meanwhile
    joins them. Once more documents arrive, its first scan reads them,
    builds the lexicon and signs in one pass, and the view equals imatch
    scan."""
    text = w.corpus.document()
    write(os.path.join(w.src, 'a.txt'), text)
    blob = bytes(range(256)) * 64 + b'\0' + os.urandom(4096)
    for name in ('photo.raw', 'old/photo-copy.raw'):
        os.makedirs(os.path.dirname(os.path.join(w.src, name)) or w.src, exist_ok=True)
        with open(os.path.join(w.src, name), 'wb') as f:
            f.write(blob)
    d = w.daemon()

    def waiting():
        st = read_status(w.mnt)
        return st.get('phase') == 'waiting-for-documents' and st.get('converged') == 'yes', st
    poll(waiting, 'phase: waiting-for-documents, converged')
    photos = frozenset(['photo.raw', 'old/photo-copy.raw'])
    wait_clusters(w.mnt, {photos}, 'the binary copies without a lexicon')
    check(scan(w.imatch, w.src) == {photos}, 'imatch scan disagrees: %s' % scan(w.imatch, w.src))
    with open(os.path.join(w.src, 'new-copy.raw'), 'wb') as f:
        f.write(blob)
    wait_clusters(w.mnt, {photos | {'new-copy.raw'}}, 'a copy made while waiting')
    poll(waiting, 'still waiting, converged, after the copy')
    write(os.path.join(w.src, 'b.txt'), w.corpus.near_duplicate(text))
    write(os.path.join(w.src, 'c.txt'), w.corpus.document())
    write(os.path.join(w.src, 'sub/a-copy.txt'), text)
    settled(w, d, 4)
    wait_clusters(w.mnt, {frozenset(['a.txt', 'b.txt', 'sub/a-copy.txt']),
                          photos | {'new-copy.raw'}})
    view_equals_scan(w, 'after the lexicon was built')
    d.umount()
    d.check_log()


@test
def test_termless_documents_do_not_rebuild_the_lexicon(w):
    """Half the documents hold no term (empty __init__.py files, a log of
    short words): the lexicon counts only the two with terms, the view all
    five, and that ratio is no reason to build the lexicon again, neither
    while mounted nor after a restart. It rebuilt once a second, forever,
    reading the tree each time. The scanner checks once a second; a save
    (at most every 5 s after a change) proves several checks went by."""
    write(os.path.join(w.src, 'a.txt'), w.corpus.document())
    write(os.path.join(w.src, 'b.txt'), w.corpus.document())
    for rel in ('pkg/__init__.py', 'pkg/sub/__init__.py', 'notes.log'):
        write(os.path.join(w.src, rel), '' if rel.endswith('.py') else 'a b c\n')
    for start in ('first mount', 'restart'):
        d = w.daemon()
        st = settled(w, d, 5)
        saves = status_int(st, 'saves') or 0
        write(os.path.join(w.src, 'notes.log'), 'a b c d\n')

        def saved_again():
            st = read_status(w.mnt)
            return (status_int(st, 'saves') or 0) > saves, st
        st = poll(saved_again, 'a save after a change (%s)' % start)
        check(status_int(st, 'relexicons') == 0 and status_int(st, 'lexicon_docs') == 2,
              '%s: the lexicon was built again: relexicons %s, lexicon_docs %s'
              % (start, st.get('relexicons'), st.get('lexicon_docs')))
        d.umount()
        d.check_log()


@test
def test_restart_rebuilds_an_outgrown_lexicon(w):
    """A daemon stopped after its scan signed a grown tree with the old
    lexicon (killed, or unmounted the moment it said converged) leaves a
    cache of the grown tree under that lexicon. The next start served it
    all from the cache and counted it as the tree the lexicon was built
    from: never rebuilt. The state is made here by signing the grown tree
    with the state's own lexicon given (-o lexicon= never rebuilds). And
    status must not say converged while a rebuild is due."""
    for i in range(2):
        write(os.path.join(w.src, 'doc%d.txt' % i), w.corpus.document())
    d = w.daemon()
    settled(w, d, 2)
    d.umount()
    d.check_log()
    for i in range(2, 8):
        write(os.path.join(w.src, 'doc%d.txt' % i), w.corpus.document())
    d = w.daemon(opts=['lexicon=' + state_lexicon(w)])
    settled(w, d, 8)
    d.umount()
    d.check_log()

    d = w.daemon()

    def converged():
        st = read_status(w.mnt)
        return st.get('converged') == 'yes', st
    st = poll(converged, 'converged after the restart')
    check(status_int(st, 'lexicon_docs') == 8 and status_int(st, 'relexicons') == 1,
          'converged with the lexicon of %s documents (relexicons %s), not rebuilt '
          'from the 8 of the tree' % (st.get('lexicon_docs'), st.get('relexicons')))
    d.umount()
    d.check_log()


@test
def test_full_state_directory_is_never_converged(w):
    """A state directory too small for the lexicon (a 4 KiB tmpfs): the
    first scan fails and is tried again; status must not say converged
    over an empty view, and counts the failed saves. Once the directory
    has room, the view converges. Needs root (tmpfs), else skips."""
    if os.geteuid() != 0:
        raise Skip('mounting a tmpfs needs root')
    for i in range(3):
        write(os.path.join(w.src, 'doc%d.txt' % i), w.corpus.document())
    state = os.path.join(w.top, 'small-state')
    os.makedirs(state)
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=4k', 'tmpfs', state],
                       capture_output=True)
    if r.returncode:
        raise Skip('cannot mount a tmpfs here: %s' % r.stderr.decode().strip())
    try:
        d = w.daemon(state=state)

        def failed_save():
            st = read_status(w.mnt)
            return (status_int(st, 'save_errors') or 0) >= 1, st
        st = poll(failed_save, 'a failed save of the state counted')
        check(st.get('converged') == 'no' and st.get('phase') == 'building-lexicon',
              'phase %s, converged %s with the state directory full'
              % (st.get('phase'), st.get('converged')))
        subprocess.run(['mount', '-o', 'remount,size=64m', state], check=True)
        settled(w, d, 3)
        poll(lambda: (read_status(w.mnt).get('converged') == 'yes', read_status(w.mnt)),
             'converged once the state directory has room')
        d.umount()
        d.check_log(allow=[r'No space left on device'])
    finally:
        subprocess.run(['umount', '-l', state])


@test
def test_source_renamed_and_back(w):
    """SOURCE renamed while mounted: the view's links name a path that is
    no longer it, so status says source_lost and never converged, and the
    log says why; renamed back, the view is whole again."""
    make_tree(w.src, w.corpus)
    d = w.daemon()
    settled(w, d)
    moved = w.src + '-moved'
    os.rename(w.src, moved)
    try:
        def lost():
            st = read_status(w.mnt)
            return st.get('source_lost') == 'yes' and st.get('converged') == 'no', st
        poll(lost, 'source_lost: yes after the rename')
    finally:
        os.rename(moved, w.src)

    def back():
        st = read_status(w.mnt)
        return st.get('source_lost') == 'no' and st.get('converged') == 'yes', st
    poll(back, 'source_lost: no once it is back')
    check('was removed or renamed' in d.log_text(), 'the log does not say so')
    d.umount()
    d.check_log(allow=[r'was removed or renamed'])


@test
def test_lexicon_rebuilt_as_tree_grows(w):
    """A share mounted nearly empty gets its lexicon from its first two
    documents (here identical: no term to tell documents apart). Once the
    tree has twice as many documents, the daemon builds the lexicon again
    from all of them and signs every file with it: status counts the
    rebuild, the lexicon has terms, and the view equals imatch scan with it."""
    text = w.corpus.document()
    write(os.path.join(w.src, 'first.txt'), text)
    write(os.path.join(w.src, 'first-copy.txt'), text)
    d = w.daemon()
    st = settled(w, d, 2)
    check(status_int(st, 'lexicon_docs') == 2, 'lexicon_docs: %s' % st.get('lexicon_docs'))
    want, docs, _ = standard(w)
    want.add(frozenset(['first.txt', 'first-copy.txt']))

    def rebuilt():
        st = read_status(w.mnt)
        ok = (status_int(st, 'relexicons') or 0) >= 1 and \
            (status_int(st, 'lexicon_docs') or 0) * 2 > len(docs) and \
            (status_int(st, 'lexicon_terms') or 0) > 0 and st.get('converged') == 'yes'
        return ok, st
    st = poll(rebuilt, 'a lexicon rebuilt from the grown tree')
    view_equals_scan(w, 'after the lexicon was rebuilt')
    wait_clusters(w.mnt, want)
    signed = status_int(read_status(w.mnt), 'signed')
    check(signed and signed >= len(docs) // 2,
          'only %s of %d documents have I-Match signatures' % (signed, len(docs) + 2))
    d.umount()
    d.check_log()
    # The restart takes the new lexicon and a cache that matches it.
    d = w.daemon()
    st = settled(w, d, len(docs) + 2)
    check(status_int(st, 'relexicons') == 0, 'rebuilt again at restart: %s' % st)
    check((status_int(st, 'cached') or 0) == len(docs) + 2,
          'cached %s of %d after a restart' % (st.get('cached'), len(docs) + 2))
    wait_clusters(w.mnt, want)
    d.umount()
    d.check_log()


@test
def test_view_equals_scan_lexicon_file(w):
    """With the same lexicon file and k, daemon and scan agree, and each
    document's `signatures` equals `imatch sign`."""
    want, docs, _ = standard(w)
    lex = os.path.join(w.top, 'lexicon')
    r = subprocess.run([w.imatch, 'lexicon', 'build', '-o', lex, w.src], capture_output=True)
    check(r.returncode == 0, 'imatch lexicon build failed: %s' % r.stderr.decode())
    sc = scan(w.imatch, w.src, ['--lexicon', lex, '-k', '4'])
    check(want <= sc, 'imatch scan with -k 4 misses the near-duplicates:\n%s' % fmt_clusters(sc))
    d = w.daemon(opts=['lexicon=' + lex, 'k=4'])
    settled(w, d, len(docs))
    wait_clusters(w.mnt, sc, 'the view (lexicon=FILE,k=4) to equal imatch scan')
    r = subprocess.run([w.imatch, 'sign', '--lexicon', lex, '-k', '4']
                       + [os.path.join(w.src, p) for p in docs], capture_output=True)
    check(r.returncode == 0, 'imatch sign failed: %s' % r.stderr.decode())
    signed = {}
    for line in os.fsdecode(r.stdout).splitlines():
        f = line.split('\t')
        signed[os.path.relpath(f[0], w.src) if os.path.isabs(f[0]) else f[0]] = f[1:]
    for p in docs:
        with open(by_doc_path(w.mnt, p, 'signatures')) as f:
            lines = f.read().splitlines()
        check(len(lines) == 5, 'by-doc/%s/signatures has %d lines, wanted k+1 = 5'
              % (p, len(lines)))
        key = p if p in signed else os.path.join(w.src, p)
        check(signed.get(key) == lines, 'by-doc/%s/signatures %s differs from imatch sign %s'
              % (p, lines, signed.get(key)))
    d.umount()
    d.check_log()


@test
def test_by_doc_file_signatures_status(w):
    """by-doc/<path>/file resolves to the source file; signatures has K+1
    lines of 40 hex digits or '-'; status has the documented keys."""
    want, docs, names = standard(w)
    d = w.daemon()
    st = settled(w, d, len(docs))
    for key in ('documents', 'signed', 'rejected', 'skipped', 'errors', 'clusters',
                'pending', 'lexicon_terms'):
        check(key in st, 'status lacks "%s:"; it has %s' % (key, sorted(st)))
        check(status_int(st, key) is not None, 'status "%s: %s" is not a number'
              % (key, st[key]))
    check(status_int(st, 'lexicon_terms') > 0, 'lexicon_terms is 0 after the first scan')
    st = poll(lambda: (status_int(read_status(w.mnt), 'clusters') == len(want),
                       read_status(w.mnt)), 'status clusters: %d' % len(want))
    check(status_int(st, 'signed') + status_int(st, 'rejected') == len(docs),
          'signed + rejected = %d + %d, wanted %d documents'
          % (status_int(st, 'signed'), status_int(st, 'rejected'), len(docs)))
    for p in docs:
        link = by_doc_path(w.mnt, p, 'file')
        check(os.readlink(link) == os.path.join(w.src, p), 'by-doc/%s/file -> %r'
              % (p, os.readlink(link)))
        with open(link, 'rb') as f, open(os.path.join(w.src, p), 'rb') as g:
            check(f.read() == g.read(), 'by-doc/%s/file does not read as the source' % p)
        with open(by_doc_path(w.mnt, p, 'signatures')) as f:
            lines = f.read().splitlines()
        check(len(lines) == DEFAULT_K + 1,
              'by-doc/%s/signatures has %d lines, wanted K+1 = %d'
              % (p, len(lines), DEFAULT_K + 1))
        for s in lines:
            check(s == '-' or (len(s) == 40 and all(c in '0123456789abcdef' for c in s)),
                  'by-doc/%s/signatures line %r' % (p, s))
    fam = names['family0']
    with open(by_doc_path(w.mnt, fam[0], 'signatures')) as f:
        a = f.read()
    with open(by_doc_path(w.mnt, fam[1], 'signatures')) as f:
        b = f.read()
    check(a == b and a.count('-') < DEFAULT_K + 1, 'a reformatted copy must have the same signatures:'
          '\n%s\n%s' % (a, b))
    with open(by_doc_path(w.mnt, 'notes/lonely.txt', 'signatures')) as f:
        check(f.read().split() == ['-'] * (DEFAULT_K + 1), 'a two-word note must be rejected everywhere')
    d.umount()
    d.check_log()


# ---- Live changes --------------------------------------------------------------------

@test
def test_new_near_duplicate(w):
    """A new near-duplicate appears in clusters/ and in both documents' dupes/;
    an unrelated new file joins no cluster."""
    want, docs, _ = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    orig = 'reports/doc00.txt'
    with open(os.path.join(w.src, orig)) as f:
        text = f.read()
    write(os.path.join(w.src, 'notes/doc00-again.txt'), w.corpus.near_duplicate(text))
    write(os.path.join(w.src, 'notes/fresh.txt'), w.corpus.document())
    wait_pair(w, orig, 'notes/doc00-again.txt', 'the new near-duplicate in the view')
    wait_clusters(w.mnt, want | {frozenset([orig, 'notes/doc00-again.txt'])})
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, 'notes/fresh.txt')), 'by-doc/notes/fresh.txt')
    check(read_dupes(w.mnt, 'notes/fresh.txt') == frozenset(), 'an unrelated file has dupes')
    check_view_invariants(w.mnt, w.src)
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_edit_breaks_similarity(w):
    """Rewriting one copy with unrelated text removes it from the cluster
    and from its former twin's dupes/."""
    want, docs, names = standard(w)
    a, b = names['family0']
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    write(os.path.join(w.src, b), w.corpus.document())
    wait_clusters(w.mnt, want - {frozenset([a, b])}, 'the edited copy to leave its cluster')
    poll(lambda: (read_dupes(w.mnt, a) == frozenset() and read_dupes(w.mnt, b) == frozenset(),
                  (sorted(read_dupes(w.mnt, a)), sorted(read_dupes(w.mnt, b)))),
         'both dupes/ to be empty')
    # Editing it back brings it back.
    with open(os.path.join(w.src, a)) as f:
        write(os.path.join(w.src, b), w.corpus.near_duplicate(f.read()))
    wait_clusters(w.mnt, want, 'the copy to come back after a second edit')
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_delete(w):
    """Deleting a member removes it from the view; deleting one of a pair
    removes the cluster."""
    want, docs, names = standard(w)
    a, b = names['family0']
    fam1 = names['family1']
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    os.unlink(os.path.join(w.src, b))
    os.unlink(os.path.join(w.src, fam1[2]))
    want2 = (want - {frozenset([a, b]), frozenset(fam1)}) | {frozenset(fam1[:2])}
    wait_clusters(w.mnt, want2, 'the deleted members to leave the view')
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, b)), 'by-doc/%s to go away' % b)
    check(read_dupes(w.mnt, a) == frozenset(), '%s still has dupes' % a)
    poll(lambda: (status_int(read_status(w.mnt), 'documents') == len(docs) - 2,
                  read_status(w.mnt).get('documents')), 'status documents: %d' % (len(docs) - 2))
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_rename_file(w):
    """Renaming a member (in its directory and across directories) moves it
    in clusters/ and by-doc/."""
    want, docs, names = standard(w)
    a, b = names['family0']
    fam1 = names['family1']
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    os.rename(os.path.join(w.src, b), os.path.join(w.src, os.path.dirname(b), 'renamed.txt'))
    nb = os.path.join(os.path.dirname(b), 'renamed.txt')
    os.makedirs(os.path.join(w.src, 'elsewhere'))
    os.rename(os.path.join(w.src, fam1[1]), os.path.join(w.src, 'elsewhere/moved.txt'))
    want2 = (want - {frozenset([a, b]), frozenset(fam1)}) | {
        frozenset([a, nb]), frozenset([fam1[0], 'elsewhere/moved.txt', fam1[2]])}
    wait_clusters(w.mnt, want2, 'the renamed members in clusters/')
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, b)), 'by-doc/%s to go away' % b)
    wait_pair(w, a, nb, 'the renamed file in dupes/')
    check(os.readlink(by_doc_path(w.mnt, 'elsewhere/moved.txt', 'file'))
          == os.path.join(w.src, 'elsewhere/moved.txt'), 'file symlink after rename')
    # Renaming over an existing document replaces it.
    os.rename(os.path.join(w.src, 'elsewhere/moved.txt'), os.path.join(w.src, 'reports/doc03.txt'))
    want3 = (want2 - {frozenset([fam1[0], 'elsewhere/moved.txt', fam1[2]])}) | {
        frozenset([fam1[0], 'reports/doc03.txt', fam1[2]])}
    wait_clusters(w.mnt, want3, 'a rename over an existing document')
    check_view_invariants(w.mnt, w.src)
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_new_subdirectory(w):
    """A new subdirectory (made with files at once, and nested) is watched:
    its files join the view, and later files in it too."""
    want, docs, names = standard(w)
    a = names['family2'][0]
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    with open(os.path.join(w.src, a)) as f:
        text = f.read()
    # makedirs and write at once: the watcher must scan what it missed.
    write(os.path.join(w.src, 'new/deep/er/copy.txt'), w.corpus.near_duplicate(text))
    wait_pair(w, a, 'new/deep/er/copy.txt', 'a file in a new nested subdirectory')
    # The new directories are watched too.
    write(os.path.join(w.src, 'new/deep/later.txt'), w.corpus.near_duplicate(text))
    poll(lambda: ('new/deep/later.txt' in cluster_with(w.mnt, a), sorted(cluster_with(w.mnt, a))),
         'a later file in the new subdirectory')
    check(os.path.isdir(by_doc_path(w.mnt, 'new/deep/er')), 'by-doc mirrors new/deep/er')
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_directory_rename(w):
    """Renaming a directory renames its documents in the view; the renamed
    directory stays watched; moving a directory in from outside SOURCE adds
    its documents, moving one out removes them."""
    want, docs, names = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)

    def ren(p):
        return 'docs2024/' + p[len('archive/2024/'):] if p.startswith('archive/2024/') else p
    os.rename(os.path.join(w.src, 'archive/2024'), os.path.join(w.src, 'docs2024'))
    want2 = {frozenset(ren(p) for p in c) for c in want}
    wait_clusters(w.mnt, want2, 'the renamed directory in clusters/')
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, 'archive/2024')),
         'by-doc/archive/2024 to go away')
    fam = [ren(p) for p in names['family2']]
    with open(os.path.join(w.src, fam[0])) as f:
        text = f.read()
    write(os.path.join(w.src, 'docs2024/after-rename.txt'), w.corpus.near_duplicate(text))
    poll(lambda: ('docs2024/after-rename.txt' in cluster_with(w.mnt, fam[0]),
                  sorted(cluster_with(w.mnt, fam[0]))), 'a new file in the renamed directory')
    want3 = (want2 - {frozenset(fam)}) | {frozenset(fam + ['docs2024/after-rename.txt'])}

    # In from outside the tree (only IN_MOVED_TO reaches the watcher).
    outside = os.path.join(w.top, 'outside')
    write(os.path.join(outside, 'x/twin.txt'), text)
    os.rename(outside, os.path.join(w.src, 'inbound'))
    want4 = (want3 - {frozenset(fam + ['docs2024/after-rename.txt'])}) | {
        frozenset(fam + ['docs2024/after-rename.txt', 'inbound/x/twin.txt'])}
    wait_clusters(w.mnt, want4, 'a directory moved in from outside SOURCE')
    # And out again.
    os.rename(os.path.join(w.src, 'inbound'), outside)
    wait_clusters(w.mnt, want3, 'a directory moved out of SOURCE')
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, 'inbound')), 'by-doc/inbound to go away')
    check_view_invariants(w.mnt, w.src)
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


@test
def test_name_taken_at_once(w):
    """A directory moved out of SOURCE (or to a hidden name) and another
    taking its name at once: the watcher pairs renames for a moment, and
    what took the name must not leave with the old one. by-doc ends equal
    to the tree, the clusters to `imatch scan`."""
    want, docs, names = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    with open(os.path.join(w.src, names['family0'][0])) as f:
        text = f.read()
    # Out of the tree, and a new directory of the same name at once.
    os.rename(os.path.join(w.src, 'reports'), os.path.join(w.top, 'gone'))
    os.mkdir(os.path.join(w.src, 'reports'))
    write(os.path.join(w.src, 'reports/new.txt'), w.corpus.near_duplicate(text))
    # To a hidden name, and another directory renamed into its place.
    os.rename(os.path.join(w.src, 'notes'), os.path.join(w.src, '.notes'))
    os.rename(os.path.join(w.src, 'archive'), os.path.join(w.src, 'notes'))

    def documents():
        have = []
        for top, _, files in os.walk(w.src):
            rel = os.path.relpath(top, w.src)
            if rel != '.' and any(c.startswith('.') for c in rel.split(os.sep)):
                continue
            have += [os.path.normpath(os.path.join(rel, f)) for f in files
                     if not f.startswith('.')]
        return set(have)
    tree = documents()
    check('reports/new.txt' in tree and any(p.startswith('notes/2024/') for p in tree),
          'the test tree is not what it means: %s' % sorted(tree))
    poll(lambda: (by_doc_documents(w.mnt) == tree,
                  'missing %s, extra %s' % (sorted(tree - by_doc_documents(w.mnt)),
                                            sorted(by_doc_documents(w.mnt) - tree))),
         'by-doc to hold the documents of the tree')
    view_equals_scan(w, 'after names were taken at once')
    d.umount()
    d.check_log()


@test
def test_editor_patterns(w):
    """What editors and shells do: save through a hidden temporary file
    renamed over the document, rapid successive rewrites (the last one
    wins), truncation to empty, rm -r of a directory, a directory renamed
    to a hidden name and back. The view ends equal to `imatch scan`."""
    want, docs, names = standard(w)
    a, b = names['family0']
    c = names['family2'][0]
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    with open(os.path.join(w.src, a)) as f:
        text_a = f.read()
    with open(os.path.join(w.src, c)) as f:
        text_c = f.read()
    # Save through ".name.swp", then rename over: b becomes a copy of c.
    tmp = os.path.join(w.src, os.path.dirname(b), '.%s.swp' % os.path.basename(b))
    write(tmp, w.corpus.near_duplicate(text_c))
    os.rename(tmp, os.path.join(w.src, b))
    poll(lambda: (b in cluster_with(w.mnt, c), sorted(cluster_with(w.mnt, c))),
         'a document saved through a hidden temporary file')
    # Rapid rewrites: the last content wins.
    for i in range(20):
        write(os.path.join(w.src, 'notes/busy.txt'),
              w.corpus.near_duplicate(text_a) if i % 2 else w.corpus.document())
    write(os.path.join(w.src, 'notes/busy.txt'), w.corpus.near_duplicate(text_a))
    poll(lambda: ('notes/busy.txt' in cluster_with(w.mnt, a), sorted(cluster_with(w.mnt, a))),
         'the last of 21 rapid rewrites')
    # Two files emptied as a shell's `: > file` does, one empty from the start.
    for p in ('reports/doc03.txt', 'notes/doc04.txt'):
        open(os.path.join(w.src, p), 'w').close()
    write(os.path.join(w.src, 'empty.txt'), '')
    # rm -r of a directory; a directory hidden and shown again.
    shutil.rmtree(os.path.join(w.src, 'archive', '2024'))
    os.rename(os.path.join(w.src, 'reports'), os.path.join(w.src, '.reports'))
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, 'reports')), 'by-doc/reports to go away')
    os.rename(os.path.join(w.src, '.reports'), os.path.join(w.src, 'reports'))
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, 'reports', 'doc00.txt')),
         'by-doc/reports back after un-hiding')
    view_equals_scan(w, 'after editor-style changes')
    d.umount()
    d.check_log()


@test
def test_temporary_files(w):
    """What editors and office programs make and remove within milliseconds
    all day (~$report.docx, report.docx.tmp, vim's 4913) is simply gone:
    no rescan of the whole tree, however many. A document saved through
    such a file renamed over it is still read again. The view ends equal
    to `imatch scan`."""
    want, docs, names = standard(w)
    a, b = names['family0']
    c = names['family2'][0]
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    rescans = status_int(read_status(w.mnt), 'rescans')
    with open(os.path.join(w.src, c)) as f:
        text_c = f.read()
    body = w.corpus.document()
    for i in range(1000):
        for name in ('reports/~$report.docx', 'notes/report.docx.tmp', '4913'):
            p = os.path.join(w.src, name)
            write(p, body)
            os.unlink(p)
    # Saved as office programs do: b becomes a copy of c.
    tmp = os.path.join(w.src, os.path.dirname(b), 'saved.tmp')
    write(tmp, w.corpus.near_duplicate(text_c))
    os.rename(tmp, os.path.join(w.src, b))
    poll(lambda: (b in cluster_with(w.mnt, c), sorted(cluster_with(w.mnt, c))),
         'a document saved through a temporary file renamed over it')
    st = poll(lambda: (read_status(w.mnt).get('converged') == 'yes', read_status(w.mnt)),
              'status to say converged after 3000 temporary files')
    check(status_int(st, 'rescans') == rescans,
          '3000 temporary files cost %d rescan(s) of the whole tree'
          % (status_int(st, 'rescans') - rescans))
    view_equals_scan(w, 'after 3000 temporary files')
    d.umount()
    d.check_log()


@test
def test_truncate_syscall(w):
    """truncate(2) changes a document without opening it (`truncate -s`):
    only IN_MODIFY reaches the watcher, no IN_CLOSE_WRITE. The view must
    still follow."""
    want, docs, names = standard(w)
    a, b = names['family0']
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    size = os.path.getsize(os.path.join(w.src, b))
    os.truncate(os.path.join(w.src, b), size // 3)
    wait_clusters(w.mnt, want - {frozenset([a, b])}, 'a copy cut to a third by truncate(2)')
    os.truncate(os.path.join(w.src, a), 0)
    os.truncate(os.path.join(w.src, b), 0)

    # Emptied, both stay documents with every coordinate rejected, and
    # empty files are no copies of each other.
    def emptied():
        with open(by_doc_path(w.mnt, a, 'signatures')) as f:
            lines = f.read().split()
        return (bool(lines) and all(x == '-' for x in lines), lines)
    poll(emptied, 'the signatures of a file truncated to empty')
    wait_clusters(w.mnt, want - {frozenset([a, b])},
                  'two files truncated to empty by truncate(2) are no copies')
    view_equals_scan(w, 'after truncate(2)')
    d.umount()
    d.check_log()


@test
def test_hard_links(w):
    """Two names of one file (a hard link in another directory, as backup
    trees have) are byte-identical near-duplicates; a write through one
    name changes both, though inotify reports it in one directory only."""
    want, docs, names = standard(w)
    a = names['family0'][0]
    os.link(os.path.join(w.src, 'reports/doc00.txt'), os.path.join(w.src, 'notes/doc00-link.txt'))
    d = w.daemon()
    settled(w, d, len(docs) + 1)
    pair = frozenset(['reports/doc00.txt', 'notes/doc00-link.txt'])
    wait_clusters(w.mnt, want | {pair}, 'a hard link clustered with its other name')
    with open(os.path.join(w.src, a)) as f:
        text = f.read()
    # Write through one name: both names now hold a copy of family0.
    with open(os.path.join(w.src, 'reports/doc00.txt'), 'w') as f:
        f.write(w.corpus.near_duplicate(text))
    fam = frozenset(names['family0']) | pair
    wait_clusters(w.mnt, (want - {frozenset(names['family0'])}) | {fam},
                  'both names of a hard-linked file after a write through one')
    view_equals_scan(w, 'after writing a hard-linked file')
    d.umount()
    d.check_log()


def root_inotify_watches():
    """inotify watches held by root's processes now (fdinfo lines)."""
    n = 0
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            if os.stat('/proc/' + pid).st_uid != 0:
                continue
            for fd in os.listdir('/proc/%s/fdinfo' % pid):
                with open('/proc/%s/fdinfo/%s' % (pid, fd)) as f:
                    n += sum(1 for l in f if l.startswith('inotify wd:'))
        except OSError:
            pass
    return n


@test
def test_watch_limit(w):
    """When inotify watches run out, status and the log say so and periodic
    rescans (-o rescan=1) still bring changes into the view. Changes the
    global fs.inotify.max_user_watches for a few seconds, so it runs only as
    root with IMATCHFS_TEST_SYSCTL=1."""
    if os.geteuid() != 0 or os.environ.get('IMATCHFS_TEST_SYSCTL') != '1':
        raise Skip('set IMATCHFS_TEST_SYSCTL=1 (as root) to lower max_user_watches')
    want, docs, names = standard(w)
    ctl = '/proc/sys/fs/inotify/max_user_watches'
    with open(ctl) as f:
        saved = f.read().strip()
    try:
        with open(ctl, 'w') as f:
            f.write(str(root_inotify_watches() + 2))
        d = w.daemon(opts=['rescan=1'])
        st = settled(w, d, len(docs))
    finally:
        with open(ctl, 'w') as f:
            f.write(saved)
    check(st.get('watch_limit_reached', 'no') not in ('no', '0'),
          'status does not say the watch limit was reached: %s' % st)
    check(any('watch' in l for l in d.log_text().splitlines()[1:]),
          'the log does not mention the watch limit')
    for i, dd in enumerate(('', 'reports', 'notes', 'archive', 'archive/2024')):
        with open(os.path.join(w.src, names['family0'][0])) as f:
            write(os.path.join(w.src, dd, 'late%d.txt' % i), w.corpus.near_duplicate(f.read()))
    view_equals_scan(w, 'with the watch limit reached (periodic rescans)')
    d.umount()
    d.check_log(allow=[r'watch', r'inotify'])


@test
def test_concurrent_readers(w):
    """Readers walking the view while files change see no errors but ENOENT
    (an entry that went away between readdir and stat)."""
    want, docs, names = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    stop, errors = threading.Event(), []

    def reader():
        while not stop.is_set():
            for root, dirs, files in os.walk(w.mnt):
                for n in dirs + files:
                    try:
                        p = os.path.join(root, n)
                        os.lstat(p)
                        if n in ('signatures', 'status'):
                            with open(p, 'rb') as f:
                                f.read()
                    except OSError as e:
                        if e.errno != errno.ENOENT:
                            errors.append('%s: %s' % (p, e))
    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        a = names['family0'][0]
        with open(os.path.join(w.src, a)) as f:
            text = f.read()
        for i in range(30):
            write(os.path.join(w.src, 'churn/c%d.txt' % (i % 7)),
                  w.corpus.near_duplicate(text) if i % 2 else w.corpus.document())
            if i % 5 == 4:
                os.unlink(os.path.join(w.src, 'churn/c%d.txt' % (i % 7)))
    finally:
        stop.set()
        for t in threads:
            t.join()
    check(not errors, 'readers saw errors:\n' + '\n'.join(errors[:20]))
    check(d.proc.poll() is None, 'the daemon died under concurrent readers')
    settled(w, d)
    check_view_invariants(w.mnt, w.src)
    view_equals_scan(w, 'after the changes')
    d.umount()
    d.check_log()


# ---- State ------------------------------------------------------------------------------

@test
def test_restart_from_cache(w):
    """After a clean unmount, a restart serves every signature from the
    cache (status cached: equals documents) and shows the same view."""
    want, docs, _ = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    before = wait_clusters(w.mnt, want)
    d.umount()
    d.check_log()
    check(os.listdir(w.state), 'the state directory is empty after a clean unmount')
    d2 = w.daemon()
    st = settled(w, d2, len(docs))
    check('cached' in st, 'status has no "cached:" key: %s' % sorted(st))
    check(status_int(st, 'cached') == len(docs), 'cached: %s after a restart, wanted %d; status %s'
          % (st.get('cached'), len(docs), st))
    wait_clusters(w.mnt, before, 'the same view after a restart')
    # A file changed while unmounted is re-read, the rest still cached.
    d2.umount()
    write(os.path.join(w.src, 'reports/doc00.txt'), w.corpus.document())
    d3 = w.daemon()
    st = settled(w, d3, len(docs))
    check(status_int(st, 'cached') == len(docs) - 1,
          'cached: %s after changing one file offline, wanted %d'
          % (st.get('cached'), len(docs) - 1))
    d3.umount()
    d3.check_log()


@test
def test_restart_after_a_stopped_scan_keeps_the_cache(w):
    """A daemon unmounted before its first scan walked the whole tree (a
    quick mount and unmount, a restart at boot) saves what it walked; the
    cache's entries of the files it did not reach must stay, so that the
    next start still reads none of them (it used to read all but the few
    the stopped walk had reached)."""
    want, docs, _ = standard(w)
    rng = random.Random(5)
    for i in range(3000):
        rel = 'bulk/d%03d/f%04d.txt' % (i % 300, i)
        write(os.path.join(w.src, rel), w.corpus.document(rng, 60))
        docs.append(rel)
    d = w.daemon()
    settled(w, d, len(docs))
    d.umount()
    # Unmounted as soon as it is mounted, while it walks the tree.
    stopped = False
    for _ in range(10):
        d2 = w.daemon(start=False).start(wait=False)
        poll(lambda: is_mounted(w.mnt), 'the mount', interval=0.001)
        d2.umount()
        if 'scan done' not in d2.log_text():
            stopped = True
            break
    if not stopped:
        print('  info: every walk ended before its unmount: nothing stopped')
    d3 = w.daemon()
    st = settled(w, d3, len(docs))
    check(status_int(st, 'cached') == len(docs),
          'cached: %s after a start whose scan was stopped, wanted %d'
          % (st.get('cached'), len(docs)))
    d3.umount()
    d3.check_log()


def rewrite_keeping_stat(path, data):
    """Write @data over the file at @path on its own inode, at its own size,
    then put its old atime and mtime back (what `cp -p` onto an existing
    file or a write and `touch -d` do). Only the ctime moves."""
    was = os.stat(path)
    check(len(data) == was.st_size, 'rewrite of %s: %d bytes, not %d'
          % (path, len(data), was.st_size))
    with open(path, 'r+b') as f:
        f.write(data)
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
    now = os.stat(path)
    check((now.st_ino, now.st_size, now.st_mtime_ns) ==
          (was.st_ino, was.st_size, was.st_mtime_ns),
          'the rewrite changed the inode, size or mtime of %s' % path)
    return was


def moved_family(w, names):
    """(the member of family2 to rewrite, its new text: family1's original
    padded to its size, the clusters once it moved)."""
    want = standard_clusters(names)
    target, origin = names['family2'][1], names['family1'][0]
    with open(os.path.join(w.src, origin), 'rb') as f:
        text = f.read()
    size = os.path.getsize(os.path.join(w.src, target))
    check(len(text) <= size, 'the generated tree changed: %s (%d bytes) does not '
          'fit in %s (%d)' % (origin, len(text), target, size))
    text += b'\n' * (size - len(text))
    fam1, fam2 = frozenset(names['family1']), frozenset(names['family2'])
    moved = (want - {fam1, fam2}) | {fam1 | {target}}
    return target, text, moved


def standard_clusters(names):
    """The clusters of standard(w) as named by its families and notes."""
    return {frozenset(v) for k, v in names.items() if k.startswith('family')} | \
        {frozenset(['notes/todo.txt', 'archive/todo-old.txt'])}


@test
def test_restart_sees_rewrite_with_old_mtime(w):
    """QA 5/3: a file rewritten on its own inode while unmounted, its size
    kept and its old mtime put back, is read again at the next mount: its
    cache entry still fits by path, inode, size and mtime, and only the
    ctime tells. It leaves family2's cluster for family1's, whose original
    it now holds."""
    want, docs, names = standard(w)
    check(want == standard_clusters(names), 'standard_clusters() is out of date')
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    d.umount()
    d.check_log()
    target, text, moved = moved_family(w, names)
    was = rewrite_keeping_stat(os.path.join(w.src, target), text)
    check(os.stat(os.path.join(w.src, target)).st_ctime_ns != was.st_ctime_ns,
          'the ctime of %s did not move' % target)
    d2 = w.daemon()
    st = settled(w, d2, len(docs))
    wait_clusters(w.mnt, moved, 'the rewritten file with its new family')
    origin = names['family1'][0]
    check(origin in read_dupes(w.mnt, target) and target in read_dupes(w.mnt, origin),
          '%s and %s are not in each other\'s dupes/' % (target, origin))
    check(status_int(st, 'cached') == len(docs) - 1,
          'cached: %s, wanted %d (all but the rewritten file)'
          % (st.get('cached'), len(docs) - 1))
    d2.umount()
    d2.check_log()


@test
def test_cached_result_yields_to_a_newer_read(w):
    """A file rewritten with an older mtime (cp -p, tar) while a restart
    still holds its cached result for the applier: the view shows what a
    worker read of the new bytes, not the cache's old result (which the
    applier took over it while the worker's mtime was older). The daemon
    runs under gdb, non-stop, its applier thread held at apply_batch() until
    the worker has signed the new bytes, so the race happens every time.
    (gdb goes on handling the other threads' stops meanwhile: it waits at its
    prompt, told on stdin when to let the applier go.)"""
    gdb = shutil.which('gdb')
    if not gdb:
        raise Skip('gdb is not installed (tools/deps.sh installs it)')
    if VALGRIND:
        raise Skip('the daemon runs under gdb here')
    want, docs, names = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    d.umount()
    target, text, moved = moved_family(w, names)
    held = os.path.join(w.top, 'held')
    cmds = os.path.join(w.top, 'gdb.cmds')
    with open(cmds, 'w') as f:
        f.write('set non-stop on\nset pagination off\nset confirm off\n'
                'break apply_batch\ncommands 1\nshell touch %s\nend\nrun &\n' % held)
    d2 = w.daemon(wrap=[gdb, '-q', '-nx', '-x', cmds, '--args'], stdin=subprocess.PIPE,
                  start=False)
    released = False

    def release():
        d2.proc.stdin.write(b'delete\ncontinue -a\n')
        d2.proc.stdin.flush()

    try:
        d2.start()
        try:
            poll(lambda: (os.path.exists(held), None), 'the applier held in gdb')
        except Fail:
            if 'ptrace' in d2.log_text():
                raise Skip('gdb may not trace here: %s' % d2.log_text()[-300:])
            raise
        path = os.path.join(w.src, target)
        with open(path, 'wb') as f:
            f.write(text)
        os.utime(path, (946684800, 946684800))  # 2000-01-01, as tar or cp -p
        # Its by-doc entry comes with the worker's result: the cached ones
        # wait with the applier.
        poll(lambda: (os.path.isdir(by_doc_path(w.mnt, target, 'dupes')), None),
             'a worker to sign the new bytes while the applier is held')
        release()
        released = True
    finally:
        if not released and d2.proc.poll() is None:
            try:
                release()
            except OSError:
                pass
    settled(w, d2, len(docs))
    wait_clusters(w.mnt, moved, 'the rewritten file with its new family, after the applier')
    view_equals_scan(w, 'after the applier went on')
    subprocess.run([fusermount(), '-u', w.mnt], check=True)
    d2.proc.stdin.close()
    d2.wait_exit(0, 'gdb after the unmount')


def stopped(pid):
    """Whether every thread of @pid is stopped, and their states."""
    states = []
    for t in os.listdir('/proc/%d/task' % pid):
        with open('/proc/%d/task/%s/stat' % (pid, t)) as f:
            states.append(f.read().rsplit(')', 1)[1].split()[0])
    return all(st in ('T', 't') for st in states), states


@test
def test_rescan_sees_write_inotify_missed(w):
    """QA 5/3 while mounted: a write whose events a full inotify queue
    dropped, its size kept and its old mtime put back, is read again by the
    rescan the overflow asks for, which trusted size and mtime before. The
    daemon is stopped (SIGSTOP) while touches of two other files fill its
    queue; the rewrite comes after them."""
    want, docs, names = standard(w)
    target, text, moved = moved_family(w, names)
    with open('/proc/sys/fs/inotify/max_queued_events') as f:
        queue = int(f.read())
    if queue > 1 << 20:
        raise Skip('max_queued_events is %d: too many touches to fill it' % queue)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    rescans = status_int(read_status(w.mnt), 'rescans')
    fillers = [os.path.join(w.src, p) for p in ('notes/lonely.txt', 'notes/todo.txt')]
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        # Every thread stopped before the first touch: a watcher still
        # reading would drain the queue as it fills, and it would not
        # overflow (seen once on a loaded host).
        poll(lambda: stopped(d.proc.pid), 'the daemon stopped by SIGSTOP')
        # Alternating names: the kernel merges an event only into an equal
        # last one.
        for i in range(queue + 1000):
            os.utime(fillers[i % 2])
        was = rewrite_keeping_stat(os.path.join(w.src, target), text)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    check(os.stat(os.path.join(w.src, target)).st_ctime_ns != was.st_ctime_ns,
          'the ctime of %s did not move' % target)
    poll(lambda: (status_int(read_status(w.mnt), 'rescans') > rescans, None),
         'a rescan after the queue overflow')
    settled(w, d, len(docs))
    wait_clusters(w.mnt, moved, 'the file written unseen with its new family')
    d.umount()
    d.check_log()


@test
def test_sigkill_state_loads(w):
    """State written by a daemon killed with SIGKILL (mid-scan, then after
    the view settled) still loads: the restart mounts, reports no error, and
    shows the right view."""
    want, docs, _ = standard(w)

    def kill(d):
        # The dead mount is cleared as the systemd unit does (ExecStopPost):
        # auto_unmount's fusermount3 sometimes leaves it after a SIGKILL
        # (7c4d9b4), and this test is about the state, not that.
        d.kill(signal.SIGKILL)
        d.wait_exit(None)
        r = subprocess.run([fusermount(), '-u', '-z', w.mnt], capture_output=True)
        check(r.returncode == 0, 'fusermount3 -u -z: %s' % r.stderr)
        poll(lambda: not in_proc_mounts(w.mnt), 'the dead mount cleared')

    d = w.daemon(auto_unmount=False)
    kill(d)
    d2 = w.daemon(auto_unmount=False)
    settled(w, d2, len(docs))
    wait_clusters(w.mnt, want, 'the view after a SIGKILL mid-scan')
    # Give a periodic save a chance to happen, then kill again.
    time.sleep(2)
    kill(d2)
    d3 = w.daemon()
    st = settled(w, d3, len(docs))
    wait_clusters(w.mnt, want, 'the view after a SIGKILL of a settled daemon')
    print('  info: cached: %s after SIGKILL of a settled daemon' % st.get('cached'))
    d3.umount()
    d3.check_log()


@test
def test_corrupt_state_refused(w):
    """A corrupt state file is refused with one line and a non-zero exit,
    and is left as it was (never silently rebuilt over)."""
    want, docs, _ = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    d.umount()
    files = []
    for root, _, names in os.walk(w.state):
        # The lock holds the pid of whoever holds it: not state.
        files += [os.path.join(root, n) for n in names if n != 'lock']
    check(files, 'no state files written')
    for p in files:
        with open(p, 'r+b') as f:
            data = bytearray(f.read())
            if data:
                mid = len(data) // 2
                data[mid] ^= 0xff
                f.seek(0)
                f.write(data)
    snapshot = {p: open(p, 'rb').read() for p in files}
    d2 = w.daemon(start=False)
    d2.start(wait=False)
    try:
        rc = d2.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        raise Fail('imatchfs started over corrupt state files %s' % files)
    check(rc != 0, 'imatchfs exited 0 over corrupt state')
    check(not in_proc_mounts(w.mnt), 'mounted over corrupt state')
    lines = [l for l in d2.log_text().splitlines() if l and not l.startswith('$ ')]
    check(len(lines) == 1, 'wanted one line on stderr, got %d:\n%s' % (len(lines), '\n'.join(lines)))
    for p in files:
        check(open(p, 'rb').read() == snapshot[p], '%s was rewritten' % p)


# ---- Names, odd files, permissions -----------------------------------------------------------

@test
def test_odd_names(w):
    """Names with spaces, a newline, '%', '%2F', non-UTF-8 bytes and 255
    bytes appear %-encoded in clusters/ and mirrored in by-doc/, and their
    symlinks resolve."""
    text = w.corpus.document()
    odd = ['with space.txt', 'new\nline.txt', '100% sure.txt', 'a%2Fb.txt',
           os.fsdecode(b'latin1-\xe9t\xe9.txt'), 'x' * 251 + '.txt', 'dir with space/in.txt',
           'per%cent dir/%25.txt']
    check(len(os.fsencode(odd[5])) == 255, 'the long name is 255 bytes')
    for p in odd:
        write(os.path.join(w.src, p), w.corpus.near_duplicate(text))
    write(os.path.join(w.src, 'plain.txt'), text)
    # Enough unrelated documents that the copies' terms are not too common
    # (nidf >= 0.2) to be in the lexicon.
    for i in range(24):
        write(os.path.join(w.src, 'other%d.txt' % i), w.corpus.document())
    want = frozenset(odd + ['plain.txt'])
    sc = scan(w.imatch, w.src)
    check(sc == {want}, 'imatch scan of the odd names:\n%s' % fmt_clusters(sc))
    d = w.daemon()
    settled(w, d, len(odd) + 25)
    poll(lambda: (want in cluster_sets(w.mnt), fmt_clusters(cluster_sets(w.mnt))),
         'one cluster of the oddly named copies')
    sig = [s for s, m in read_clusters(w.mnt).items() if m == want][0]
    names = set(os.listdir(os.path.join(w.mnt, 'clusters', sig)))
    check(names == {encode_member(p) for p in want}, 'member names %r' % sorted(names))
    for p in odd:
        link = os.path.join(w.mnt, 'clusters', sig, encode_member(p))
        check(os.readlink(link) == os.path.join(w.src, p), 'target of %r' % link)
        check(os.path.isfile(link), 'clusters/%s/%r does not resolve' % (sig, encode_member(p)))
        check(os.path.isfile(by_doc_path(w.mnt, p, 'file')), 'by-doc/%r/file does not resolve' % p)
        check('plain.txt' in read_dupes(w.mnt, p), 'plain.txt not in dupes of %r' % p)
    d.umount()
    d.check_log()


@test
def test_unreadable_and_binary(w):
    """An unreadable file, a binary file, a FIFO and symbolic links are
    counted in status, get no by-doc entry and do not stop the daemon.

    Root reads a mode-000 file anyway, so as root the daemon runs with
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its bounding set
    (setpriv), which makes mode 000 binding for it too."""
    want, docs, _ = standard(w)
    write(os.path.join(w.src, 'secret.txt'), w.corpus.document(), mode=0)
    write(os.path.join(w.src, 'image.bin'), b'\x89PNG\r\n\x1a\n\0\0\0\rIHDR' + bytes(range(256)) * 8)
    os.mkfifo(os.path.join(w.src, 'pipe.txt'))
    # Symbolic links are not followed, in or out of SOURCE.
    outside = os.path.join(w.top, 'outside')
    write(os.path.join(outside, 'twin.txt'), open(os.path.join(w.src, docs[0])).read())
    os.symlink(os.path.join(outside, 'twin.txt'), os.path.join(w.src, 'link.txt'))
    os.symlink(outside, os.path.join(w.src, 'linkdir'))
    os.symlink(docs[0], os.path.join(w.src, 'inner-link.txt'))
    wrap = ()
    if os.geteuid() == 0:
        if not shutil.which('setpriv'):
            raise Skip('running as root and setpriv is missing: cannot make a file unreadable')
        wrap = ('setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--inh-caps',
                '-dac_override,-dac_read_search', '--')
    d = w.daemon(wrap=wrap)
    st = settled(w, d, len(docs))
    check(status_int(st, 'errors') >= 1, 'the unreadable file is not counted in errors: %s' % st)
    check((status_int(st, 'binary') or 0) + (status_int(st, 'skipped') or 0) >= 1,
          'the binary file is counted neither in binary: nor in skipped: %s' % st)
    for p in ('secret.txt', 'image.bin', 'pipe.txt', 'link.txt', 'linkdir', 'inner-link.txt'):
        check(not os.path.lexists(by_doc_path(w.mnt, p)), 'by-doc/%s exists' % p)
    wait_clusters(w.mnt, want)
    # Still alive and following changes.
    write(os.path.join(w.src, 'after.txt'), w.corpus.document())
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, 'after.txt')), 'a new file after the odd ones')
    d.umount()
    d.check_log(allow=[r'secret\.txt', r'[Pp]ermission denied'])


def unprivileged_wrap():
    """What makes a root daemon bound by file modes (see
    test_unreadable_and_binary); () when not root."""
    if os.geteuid() != 0:
        return ()
    if not shutil.which('setpriv'):
        raise Skip('running as root and setpriv is missing: cannot make a file unreadable')
    return ('setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--inh-caps',
            '-dac_override,-dac_read_search', '--')


@test
def test_chmod_unreadable_leaves_view(w):
    """A document made unreadable while mounted leaves the view and comes
    back when it is readable again; made unreadable while unmounted, it is
    not shown from the cache (which knows sizes and times, not modes)."""
    want, docs, names = standard(w)
    victim = names['family0'][1]
    path = os.path.join(w.src, victim)
    d = w.daemon(wrap=unprivileged_wrap())
    settled(w, d, len(docs))
    check(os.path.isdir(by_doc_path(w.mnt, victim)), 'by-doc/%s missing at first' % victim)
    os.chmod(path, 0)
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, victim)),
         'by-doc/%s to go after chmod 000' % victim)
    os.chmod(path, 0o644)
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, victim)),
         'by-doc/%s to come back after chmod 644' % victim)
    d.umount()
    # Made unreadable while no daemon watched: the cache still has it.
    os.chmod(path, 0)
    d = w.daemon(wrap=unprivileged_wrap())
    settled(w, d)
    check(not os.path.lexists(by_doc_path(w.mnt, victim)),
          'by-doc/%s is back after a restart from the cache' % victim)
    os.chmod(path, 0o644)
    poll(lambda: os.path.isdir(by_doc_path(w.mnt, victim)),
         'by-doc/%s to come back after chmod 644' % victim)
    wait_clusters(w.mnt, want)
    d.umount()
    d.check_log(allow=[re.escape(victim), r'[Pp]ermission denied'])


@test
def test_hidden_and_state_excluded(w):
    """Names beginning with '.' and the state directory (even inside SOURCE)
    are not read; -o hidden includes dot files."""
    want, docs, names = standard(w)
    a = names['family0'][0]
    with open(os.path.join(w.src, a)) as f:
        text = f.read()
    write(os.path.join(w.src, '.hidden-copy.txt'), w.corpus.near_duplicate(text))
    write(os.path.join(w.src, '.git/objects/copy.txt'), w.corpus.near_duplicate(text))
    inner = os.path.join(w.src, 'statedir')
    os.mkdir(inner)
    d = w.daemon(state=inner)
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want, 'a view without dot files')
    check(not os.path.lexists(by_doc_path(w.mnt, 'statedir')), 'the state directory is in by-doc')
    d.umount()
    d.check_log()
    d2 = w.daemon(opts=['hidden'], state=os.path.join(w.top, 'state2'))
    settled(w, d2, len(docs) + 2)
    fam = names['family0']
    poll(lambda: (frozenset(fam + ['.hidden-copy.txt', '.git/objects/copy.txt'])
                  in cluster_sets(w.mnt), fmt_clusters(cluster_sets(w.mnt))),
         'dot files in the view with -o hidden')
    d2.umount()
    d2.check_log()


@test
def test_modes_follow_source(w):
    """by-doc entries carry the source file's owner, and a file others
    cannot read gives an entry others cannot read."""
    want, docs, _ = standard(w)
    p = 'reports/doc00.txt'
    os.chmod(os.path.join(w.src, p), 0o600)
    try:
        os.chown(os.path.join(w.src, 'reports/doc03.txt'), 4321, 4322)
        chowned = True
    except PermissionError:
        chowned = False
    d = w.daemon()
    settled(w, d, len(docs))
    st = os.stat(by_doc_path(w.mnt, p))
    check(st.st_mode & 0o077 & 0o044 == 0, 'by-doc/%s has mode %o for a 0600 file'
          % (p, st.st_mode))
    if chowned:
        st = os.stat(by_doc_path(w.mnt, 'reports/doc03.txt'))
        check((st.st_uid, st.st_gid) == (4321, 4322), 'by-doc owner %d:%d, wanted 4321:4322'
              % (st.st_uid, st.st_gid))
    d.umount()
    d.check_log()


# ---- Read-only, mounting, signals -----------------------------------------------------------

def as_nobody(code):
    """Run python @code as uid/gid 65534; return (exit status, output)."""
    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    exe = '/usr/bin/python3' if os.path.exists('/usr/bin/python3') else sys.executable
    try:
        r = subprocess.run([exe, '-c', code], preexec_fn=drop, capture_output=True,
                           timeout=DEADLINE)
    except PermissionError:
        raise Skip('user 65534 cannot run %s' % exe)
    return r.returncode, (r.stdout + r.stderr).decode(errors='replace').strip()


@test
def test_allow_other(w):
    """By default only the mounting user sees the mount; with
    allow_other,default_permissions another user sees by-doc entries with
    the source's modes: a 0600 document stays closed to them."""
    if os.geteuid() != 0:
        raise Skip('needs root to act as another user')
    want, docs, _ = standard(w)
    os.chmod(w.top, 0o755)
    for root, dirs, files in os.walk(w.src):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            os.chmod(os.path.join(root, n), 0o644)
    os.chmod(os.path.join(w.src, 'reports/doc00.txt'), 0o600)
    probe = """
import os, sys
m = sys.argv[1] if len(sys.argv) > 1 else %r
def tryit(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return e.strerror
print(tryit(lambda: os.listdir(m + '/clusters')))
print(tryit(lambda: os.listdir(m + '/by-doc/reports/doc03.txt/dupes')))
print(tryit(lambda: open(m + '/by-doc/reports/doc03.txt/signatures').read()))
print(tryit(lambda: os.listdir(m + '/by-doc/reports/doc00.txt/dupes')))
print(tryit(lambda: open(m + '/by-doc/reports/doc00.txt/signatures').read()))
""" % w.mnt
    d = w.daemon()
    settled(w, d, len(docs))
    rc, out = as_nobody(probe)
    check(out.splitlines()[:1] == ['Permission denied'],
          'another user reads a mount without allow_other: %r' % out)
    d.umount()
    d.check_log()
    d2 = w.daemon(opts=['allow_other', 'default_permissions'])
    settled(w, d2, len(docs))
    rc, out = as_nobody(probe)
    check(out.splitlines() == ['ok', 'ok', 'ok', 'Permission denied', 'Permission denied'],
          'as another user with allow_other,default_permissions (clusters, 0644 dupes, '
          '0644 signatures, 0600 dupes, 0600 signatures): %r' % out.splitlines())
    d2.umount()
    d2.check_log()


@test
def test_writes_get_erofs(w):
    """Every kind of write to the view fails with EROFS; the source is untouched."""
    want, docs, _ = standard(w)
    d = w.daemon()
    settled(w, d, len(docs))
    wait_clusters(w.mnt, want)
    m = w.mnt
    sig = sorted(read_clusters(m))[0]
    member = os.listdir(os.path.join(m, 'clusters', sig))[0]
    doc = 'reports/doc00.txt'
    cases = [
        ('create in /', lambda: os.close(os.open(os.path.join(m, 'new'), os.O_CREAT | os.O_WRONLY, 0o644))),
        ('create in by-doc/', lambda: os.close(os.open(by_doc_path(m, 'reports', 'x'), os.O_CREAT | os.O_WRONLY, 0o644))),
        ('mkdir in clusters/', lambda: os.mkdir(os.path.join(m, 'clusters', 'x'))),
        ('mkdir in by-doc/', lambda: os.mkdir(by_doc_path(m, 'newdir'))),
        ('unlink a member', lambda: os.unlink(os.path.join(m, 'clusters', sig, member))),
        ('rmdir a cluster', lambda: os.rmdir(os.path.join(m, 'clusters', sig))),
        ('unlink by-doc file', lambda: os.unlink(by_doc_path(m, doc, 'file'))),
        ('write status', lambda: os.close(os.open(os.path.join(m, 'status'), os.O_WRONLY))),
        ('truncate signatures', lambda: os.truncate(by_doc_path(m, doc, 'signatures'), 0)),
        ('rename a member', lambda: os.rename(os.path.join(m, 'clusters', sig, member),
                                              os.path.join(m, 'clusters', sig, 'x'))),
        ('rename by-doc dir', lambda: os.rename(by_doc_path(m, 'reports'), by_doc_path(m, 'r2'))),
        ('symlink', lambda: os.symlink('/etc/passwd', os.path.join(m, 'clusters', sig, 'x'))),
        ('chmod status', lambda: os.chmod(os.path.join(m, 'status'), 0o777)),
    ]
    for what, fn in cases:
        expect_errno(fn, errno.EROFS, what)
    check(sorted(os.listdir(w.src)) == ['archive', 'notes', 'reports'], 'source changed: %s'
          % os.listdir(w.src))
    d.umount()
    d.check_log()


@test
def test_mount_over_source(w):
    """`imatchfs D D` mounts over the source itself and shows its clusters."""
    want, docs, _ = standard(w)
    d = w.daemon(mnt=w.src)
    check(is_mounted(w.src), 'not mounted over the source')
    settled(w, d, len(docs))
    wait_clusters(w.src, want, 'clusters when mounted over the source')
    check(sorted(os.listdir(w.src)) == ['by-doc', 'clusters', 'dup-dirs', 'redundant',
                                        'status'],
          'the mount root holds %s' % os.listdir(w.src))
    docs_seen = by_doc_documents(w.src)
    check(docs_seen == set(docs), 'by-doc over the source: missing %s'
          % sorted(set(docs) - docs_seen))
    d.umount()
    d.check_log()
    check(sorted(os.listdir(w.src)) == ['archive', 'notes', 'reports'], 'source after unmount: %s'
          % os.listdir(w.src))


@test
def test_mountpoint_inside_source(w):
    """`imatchfs ~ ~/dupes`: a mountpoint inside SOURCE is left out of the
    walk (the daemon must never read its own view), the view equals the
    scan of the tree made before mounting, and it unmounts cleanly."""
    want, docs, _ = standard(w)
    inner = os.path.join(w.src, 'dupes')
    os.mkdir(inner)
    sc = scan(w.imatch, w.src)
    d = w.daemon(mnt=inner)
    st = settled(w, d, len(docs))
    check(status_int(st, 'directories') in (None, 5, 6),
          'directories: %s; the walk went into its own mount?' % st.get('directories'))
    wait_clusters(inner, sc, 'the clusters with the mountpoint inside SOURCE')
    docs_seen = by_doc_documents(inner)
    check(docs_seen == set(docs), 'by-doc with the mountpoint inside SOURCE: extra %s'
          % sorted(docs_seen - set(docs))[:5])
    # Live changes still work, and do not wake the walk into the mount.
    write(os.path.join(w.src, 'late.txt'), w.corpus.document())
    poll(lambda: os.path.isdir(by_doc_path(inner, 'late.txt')), 'by-doc/late.txt')
    d.umount()
    d.check_log()


@test
def test_signals_unmount(w):
    """SIGTERM and SIGINT unmount and exit cleanly."""
    _, docs, _ = standard(w)
    for sig in (signal.SIGTERM, signal.SIGINT):
        d = w.daemon()
        settled(w, d, len(docs))
        d.kill(sig)
        d.wait_exit(0, 'after %s' % signal.Signals(sig).name)
        poll(lambda: not in_proc_mounts(w.mnt), 'the mount to go away after %s'
             % signal.Signals(sig).name)
        d.check_log()


def daemon_pid(state):
    """The pid of the imatchfs whose command line names state dir STATE."""
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                args = f.read().split(b'\0')
        except OSError:
            continue
        if any(b'state=' + os.fsencode(state) in a.split(b',') for a in args):
            return int(pid)
    raise Fail('no imatchfs process with state=%s' % state)


@test
def test_signals_unmount_relative(w):
    """A mountpoint given relative to the current directory is unmounted at
    SIGTERM too (the daemon changes to / when it starts serving), with and
    without -f; without auto_unmount, so that only the daemon's own unmount
    can remove it."""
    _, docs, _ = standard(w)
    for fg in (True, False):
        d = w.daemon(cwd=w.top, foreground=fg, auto_unmount=False, start=False)
        d.start(wait=False)
        if not fg:
            check(d.proc.wait(timeout=DEADLINE) == 0,
                  'imatchfs without -f failed: %s' % d.log_text())
        poll(lambda: is_mounted(w.mnt), 'the mount')
        settled(w, None, len(docs))
        pid = d.proc.pid if fg else daemon_pid(w.state)
        os.kill(pid, signal.SIGTERM)
        if fg:
            d.wait_exit(0, 'after SIGTERM')
        poll(lambda: not in_proc_mounts(w.mnt),
             'the mount to go away after SIGTERM (%s)' % ('-f' if fg else 'daemon'))
        check('failed to unmount' not in d.log_text(), 'log: %s' % d.log_text())


@test
def test_daemonizes(w):
    """Without -f, imatchfs returns once mounted and the mount serves."""
    want, docs, _ = standard(w)
    d = w.daemon(foreground=False, start=False)
    d.start(wait=False)
    try:
        rc = d.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        raise Fail('imatchfs without -f did not return')
    check(rc == 0, 'imatchfs without -f exited %d: %s' % (rc, d.log_text()))
    check(is_mounted(w.mnt), 'not mounted when imatchfs returned')
    try:
        settled(w, None, len(docs))
        wait_clusters(w.mnt, want)
    finally:
        r = subprocess.run(['fusermount3', '-u', w.mnt], capture_output=True)
    check(r.returncode == 0, 'fusermount3 -u failed: %s' % r.stderr.decode())
    poll(lambda: not in_proc_mounts(w.mnt), 'the mount to go away')


# ---- Bad arguments ----------------------------------------------------------------------------

def refused(w, args, what, mnt=None):
    """imatchfs -f ARGS must exit non-zero with one line on stderr and not mount."""
    mnt = mnt or w.mnt
    r = None
    try:
        r = subprocess.run([w.imatchfs, '-f'] + args, capture_output=True, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        raise Fail('%s: imatchfs %s kept running' % (what, ' '.join(args)))
    finally:
        if in_proc_mounts(mnt):
            subprocess.run(['fusermount3', '-u', '-z', mnt], capture_output=True)
            raise Fail('%s: imatchfs %s mounted' % (what, ' '.join(args)))
    check(r.returncode != 0, '%s: exit status 0' % what)
    lines = [l for l in r.stderr.decode(errors='replace').splitlines() if l.strip()]
    check(len(lines) == 1, '%s: wanted one line on stderr, got %d:\n%s'
          % (what, len(lines), '\n'.join(lines)))
    print('  %s: %s' % (what, lines[0]))


@test
def test_bad_arguments(w):
    """Missing SOURCE, non-empty mountpoint, unknown option, corrupt lexicon."""
    st = 'state=' + w.state
    write(os.path.join(w.src, 'a.txt'), w.corpus.document())
    refused(w, ['-o', st, w.mnt], 'only one path')
    refused(w, ['-o', st, os.path.join(w.top, 'nonexistent'), w.mnt], 'missing SOURCE')
    busy = os.path.join(w.top, 'busy')
    write(os.path.join(busy, 'something'), 'x')
    refused(w, ['-o', st, w.src, busy], 'non-empty mountpoint', mnt=busy)
    refused(w, ['-o', st, w.src, os.path.join(w.top, 'nomnt')], 'missing mountpoint')
    refused(w, ['-o', st + ',no_such_option=1', w.src, w.mnt], 'unknown option')
    refused(w, ['-o', st + ',k=99', w.src, w.mnt], 'k out of range')
    lex = os.path.join(w.top, 'corrupt.lex')
    write(lex, b'this is not a lexicon\n' * 10)
    refused(w, ['-o', st + ',lexicon=' + lex, w.src, w.mnt], 'corrupt lexicon')
    check(open(lex, 'rb').read() == b'this is not a lexicon\n' * 10, 'the lexicon file was rewritten')
    refused(w, ['-o', st + ',lexicon=' + lex + '.missing', w.src, w.mnt], 'missing lexicon')


def demo_checkout(w):
    """A checkout of tools/demo.sh alone under w.top: its deps.sh finds
    nothing to install and its build has nothing to do, so only the mount
    is exercised. Return the script's path."""
    if VALGRIND:
        raise Skip('demo.sh starts the daemon itself')
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.join(w.top, 'checkout')
    os.makedirs(os.path.join(top, 'tools'))
    os.makedirs(os.path.join(top, 'build', 'fs'))
    shutil.copy(os.path.join(here, '..', '..', 'tools', 'demo.sh'),
                os.path.join(top, 'tools', 'demo.sh'))
    write(os.path.join(top, 'tools', 'deps.sh'), '#!/bin/sh\nexit 0\n', mode=0o755)
    write(os.path.join(top, 'build', 'build.ninja'), '')
    os.symlink(w.imatchfs, os.path.join(top, 'build', 'fs', 'imatchfs'))
    for i in range(2):
        write(os.path.join(w.src, 'doc%d.txt' % i), w.corpus.document())
    return os.path.join(top, 'tools', 'demo.sh')


def run_demo(w, script, *args):
    out = subprocess.run(['bash', script] + list(args), cwd=w.top,
                         env=dict(os.environ, XDG_STATE_HOME=w.state),
                         capture_output=True, text=True, timeout=DEADLINE * 4)
    check(out.returncode == 0, 'demo.sh %s exited %d: %s'
          % (' '.join(args), out.returncode, out.stderr))
    return out.stdout


def demo_cleanup(w, mnts):
    for m in mnts:
        if in_proc_mounts(m):
            subprocess.run([fusermount(), '-u', m], check=False)
    # The daemon lets its state's lock go after its final save: wait for
    # that before the tmp directory goes.
    for lock in glob.glob(os.path.join(w.state, 'imatchfs', '*', 'lock')):
        with open(lock) as f:
            poll(lambda: flock_free(f), 'the daemon to let %s go' % lock)


def flock_free(f):
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(f, fcntl.LOCK_UN)
    return True


@test
def test_demo_relative_mountpoint(w):
    """tools/demo.sh SOURCE MOUNTPOINT with relative paths mounts where the
    user stands, not inside the checkout it builds in: the commands it
    prints next (ls, fusermount3 -u) name that mountpoint."""
    script = demo_checkout(w)
    here_mnt = os.path.join(w.top, 'view')
    wrong_mnt = os.path.join(w.top, 'checkout', 'view')
    try:
        out = run_demo(w, script, 'src', 'view')
        check(not in_proc_mounts(wrong_mnt), 'demo.sh mounted inside its checkout, at %s'
              % wrong_mnt)
        check(in_proc_mounts(here_mnt), 'nothing mounted at %s, where demo.sh was asked to'
              % here_mnt)
        check('fusermount3 -u %s' % here_mnt in out,
              'demo.sh does not say how to unmount %s:\n%s' % (here_mnt, out))
    finally:
        demo_cleanup(w, (here_mnt, wrong_mnt))



@test
def test_demo_replaces_a_dead_mount(w):
    """demo.sh again after its daemon died (killed, crashed): the dead
    mount it left, where every stat fails with ENOTCONN, is replaced like a
    live one instead of failing in mkdir."""
    script = demo_checkout(w)
    mnt = os.path.join(w.top, 'view')
    try:
        run_demo(w, script, 'src', mnt)
        ctl = '/sys/fs/fuse/connections'
        if not os.path.isdir(os.path.join(ctl, str(mount_minor(mnt)))):
            subprocess.run(['mount', '-t', 'fusectl', 'none', ctl], capture_output=True)
        try:
            with open(os.path.join(ctl, str(mount_minor(mnt)), 'abort'), 'w') as f:
                f.write('1')
        except OSError as e:
            raise Skip('cannot abort a FUSE connection: %s' % e.strerror)
        expect_errno(lambda: os.stat(mnt), errno.ENOTCONN, 'stat of the dead mount')
        # Its daemon, told the connection is gone, saves and exits.
        demo_cleanup(w, ())
        out = run_demo(w, script, 'src', mnt)
        check(is_mounted(mnt) and 'phase: live' in out,
              'demo.sh did not mount again over the dead mount:\n%s' % out)
    finally:
        demo_cleanup(w, (mnt,))

if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
