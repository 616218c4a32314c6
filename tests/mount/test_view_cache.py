#!/usr/bin/env python3
"""The kernel caches the view for a long time (entries, attributes, listings,
symlink targets: issue 10); every change must still show at once, through
invalidation. Each test walks the whole view first (`ls -lR`, which fills
every cache), then changes the source and polls the cached paths.

    test_view_cache.py IMATCHFS IMATCH [TEST...]
    test_view_cache.py --list
"""

import os
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (by_doc_path, check, cluster_sets, make_tree, poll,  # noqa: E402
                  read_dupes, read_status, requests, run_tests, status_int, write)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def settle(w, n):
    def ok():
        st = read_status(w.mnt)
        done = (status_int(st, 'pending') == 0 and st.get('phase') == 'live'
                and (status_int(st, 'signed') or 0) + (status_int(st, 'rejected') or 0) == n)
        return done, st
    poll(ok, 'status to settle with %d documents' % n)


def walk(mnt):
    """`ls -lR` of the whole view: every entry, attribute and target cached."""
    r = subprocess.run(['ls', '-lR', mnt], capture_output=True)
    check(r.returncode == 0, 'ls -lR failed: %s' % r.stderr.decode(errors='replace'))
    return r.stdout


def cluster_of(mnt, rel):
    for c in cluster_sets(mnt):
        if rel in c:
            return c
    return frozenset()


@test
def test_change_after_walk(w):
    """After `ls -lR`: a new near-duplicate, a deleted member, a renamed
    member and a chmod show in clusters/, dupes/ and by-doc/ (whose entries
    the kernel would otherwise keep for a day)."""
    want, docs, names = make_tree(w.src, w.corpus)
    d = w.daemon()
    settle(w, len(docs))
    poll(lambda: (cluster_sets(w.mnt) == want, cluster_sets(w.mnt)), 'the clusters')
    walk(w.mnt)

    orig = 'reports/doc00.txt'
    with open(os.path.join(w.src, orig)) as f:
        text = f.read()
    write(os.path.join(w.src, 'notes/again.txt'), w.corpus.near_duplicate(text))
    poll(lambda: ('notes/again.txt' in read_dupes(w.mnt, orig),
                  sorted(read_dupes(w.mnt, orig))), 'a new dupe in a cached dupes/')
    poll(lambda: (cluster_of(w.mnt, orig) == {orig, 'notes/again.txt'},
                  sorted(cluster_of(w.mnt, orig))), 'the new cluster in a cached clusters/')
    walk(w.mnt)

    a, b = names['family0']
    os.unlink(os.path.join(w.src, b))
    poll(lambda: not os.path.lexists(by_doc_path(w.mnt, b)), 'a deleted document to leave by-doc/')
    poll(lambda: (read_dupes(w.mnt, a) == frozenset(), sorted(read_dupes(w.mnt, a))),
         'a deleted document to leave its twin\'s dupes/')
    check(all(b not in c for c in cluster_sets(w.mnt)), 'a deleted document is still in clusters/')
    walk(w.mnt)

    fam = names['family1']
    new = os.path.join(os.path.dirname(fam[1]), 'renamed.txt')
    os.rename(os.path.join(w.src, fam[1]), os.path.join(w.src, new))
    poll(lambda: (new in read_dupes(w.mnt, fam[0]) and fam[1] not in read_dupes(w.mnt, fam[0]),
                  sorted(read_dupes(w.mnt, fam[0]))), 'a renamed member in a cached dupes/')
    poll(lambda: (os.readlink(by_doc_path(w.mnt, new, 'file')) == os.path.join(w.src, new),
                  os.readlink(by_doc_path(w.mnt, new, 'file'))), 'the renamed file symlink')
    walk(w.mnt)

    os.chmod(os.path.join(w.src, orig), 0o600)
    poll(lambda: (stat.S_IMODE(os.stat(by_doc_path(w.mnt, orig)).st_mode) & 0o044 == 0,
                  oct(os.stat(by_doc_path(w.mnt, orig)).st_mode)), 'a chmod in cached attributes')
    st = read_status(w.mnt)
    check(status_int(st, 'invalidations') > 0, 'status counts no invalidation: %s' % st)
    d.umount()
    d.check_log()


@test
def test_warm_walk_asks_nothing(w):
    """Mounted as `imatchfs SRC MNT` mounts (no auto_unmount), a warm
    `ls -lR` and `find` of the whole view are answered by the kernel alone:
    no directory is opened through the daemon, no listing, entry, attribute
    or link asked again, and ls's questions for SELinux labels and ACLs
    stop after the first file. A change right after still shows at once in
    the cached listings."""
    want, docs, names = make_tree(w.src, w.corpus)
    d = w.daemon(args=['-d'], auto_unmount=False)
    settle(w, len(docs))
    poll(lambda: (cluster_sets(w.mnt) == want, cluster_sets(w.mnt)), 'the clusters')
    for _ in range(2):
        walk(w.mnt)
        subprocess.run(['find', w.mnt], capture_output=True)
    start = os.path.getsize(d.log)
    walk(w.mnt)
    r = subprocess.run(['find', w.mnt], capture_output=True)
    check(r.returncode == 0, 'find failed: %s' % r.stderr.decode(errors='replace'))
    asked = requests(d, start)
    check(not any(asked.get(op) for op in ('OPENDIR', 'RELEASEDIR', 'READDIR',
                                           'READDIRPLUS', 'LOOKUP', 'GETATTR',
                                           'READLINK'))
          and asked.get('GETXATTR', 0) <= 3,
          'a warm ls -lR and find asked the daemon: %r' % asked)

    orig = 'reports/doc00.txt'
    with open(os.path.join(w.src, orig)) as f:
        text = f.read()
    write(os.path.join(w.src, 'reports/again.txt'), w.corpus.near_duplicate(text))
    poll(lambda: ('again.txt' in os.listdir(os.path.join(w.mnt, 'by-doc', 'reports')),
                  sorted(os.listdir(os.path.join(w.mnt, 'by-doc', 'reports')))),
         'a new document in a cached by-doc listing')
    poll(lambda: ('reports/again.txt' in read_dupes(w.mnt, orig),
                  sorted(read_dupes(w.mnt, orig))), 'a new dupe in a cached dupes/')
    os.unlink(os.path.join(w.src, 'reports/again.txt'))
    poll(lambda: ('again.txt' not in os.listdir(os.path.join(w.mnt, 'by-doc', 'reports')),
                  sorted(os.listdir(os.path.join(w.mnt, 'by-doc', 'reports')))),
         'a deleted document gone from a cached by-doc listing')
    d.umount()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
