#!/usr/bin/env python3
"""`imatch state import` (issue 14): a daemon whose state directory was
seeded from a batch run serves the tree, or a subtree of it, without
re-signing the files that did not change, and shows what `imatch scan`
shows.

    test_import.py IMATCHFS IMATCH [TEST...]
    test_import.py --list

The batch run is the stage commands themselves (ls, df, df merge, lexicon
build --from-df, sign --records), as tools/scale/imatch-cluster runs them,
over two shards: no Dask is needed here.
"""

import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (check, cluster_sets, fmt_clusters, make_tree, poll,  # noqa: E402
                  read_status, run_tests, scan, status_int, write)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def imatch(w, *args, code=0):
    r = subprocess.run([w.imatch] + list(args), capture_output=True)
    check(r.returncode == code, 'imatch %s: exit %d, expected %d: %s'
          % (' '.join(args[:2]), r.returncode, code,
             r.stderr.decode(errors='replace')))
    return r.stderr.decode(errors='replace')


def batch(w):
    """The stage files of the source tree, under TOP/batch."""
    out = os.path.join(w.top, 'batch')
    shards = os.path.join(out, 'shards')
    os.makedirs(os.path.join(out, 'df'))
    imatch(w, 'ls', '-o', os.path.join(out, 'manifest'), '--shards', shards,
           '--shard-bytes', '20000', w.src)
    lists = sorted(glob.glob(os.path.join(shards, '0*')))
    check(len(lists) >= 2, 'the tree makes two shards or more: %s' % lists)
    for i, sh in enumerate(lists):
        imatch(w, 'df', '--files-from', sh, '--root', w.src, '-P', '2', '-o',
               os.path.join(out, 'df', '%d' % i))
    merged = []
    for p in range(2):
        merged.append(os.path.join(out, 'df', 'merged.p%d' % p))
        imatch(w, 'df', 'merge', '-o', merged[-1],
               *[os.path.join(out, 'df', '%d.p%04d' % (i, p))
                 for i in range(len(lists))])
    lexicon = os.path.join(out, 'lexicon')
    imatch(w, 'lexicon', 'build', '--from-df', '-o', lexicon, *merged)
    records = []
    for i, sh in enumerate(lists):
        prefix = os.path.join(out, 's%d' % i)
        imatch(w, 'sign', '--records', '--files-from', sh, '--root', w.src,
               '--shard-id', '%d/%d' % (i, len(lists)), '-P', '2',
               '--lexicon', lexicon, '-o', prefix)
        records.append(prefix + '.rec')
    return lexicon, records


def make_source(w):
    make_tree(w.src, w.corpus)
    # A family inside notes/, so that the subtree has a cluster of its own.
    text = w.corpus.document()
    write(os.path.join(w.src, 'notes', 'minutes.txt'), text)
    write(os.path.join(w.src, 'notes', 'minutes-v2.txt'),
          w.corpus.near_duplicate(text))


def settled(w):
    def ok():
        st = read_status(w.mnt)
        return st.get('converged') == 'yes', st
    return poll(ok, 'the mount to converge')


def documents(root):
    return sum(len(files) for _, _, files in os.walk(root))


@test
def test_import_tree(w):
    """Import the whole run, mount the tree: every document comes from the
    cache and the clusters are `imatch scan`'s."""
    make_source(w)
    lexicon, records = batch(w)
    err = imatch(w, 'state', 'import', '-v', '--lexicon', lexicon, '-o',
                 w.state, *records)
    n = documents(w.src)
    check('%d documents imported' % n in err, err)
    d = w.daemon()
    st = settled(w)
    check(status_int(st, 'documents') == n and status_int(st, 'cached') == n,
          'all %d documents served from the imported state: %s' % (n, st))
    want = scan(w.imatch, w.src)
    got = cluster_sets(w.mnt)
    check(got == want, 'the view equals imatch scan:\nview:\n%s\nscan:\n%s'
          % (fmt_clusters(got), fmt_clusters(want)))
    # The state directory is the daemon's while it runs.
    err = imatch(w, 'state', 'import', '--lexicon', lexicon, '-o', w.state,
                 *records, code=1)
    check('in use' in err, 'import into a mounted state is refused: %s' % err)
    d.umount()
    d.check_log()


@test
def test_import_subtree(w):
    """Import one directory of the run and mount it after one of its files
    changed: the others are not read again, that one is, and the view is
    `imatch scan` of the directory under the run's lexicon."""
    make_source(w)
    lexicon, records = batch(w)
    changed = os.path.join(w.src, 'notes', 'minutes-v2.txt')
    with open(changed, 'a') as f:
        f.write('\nOne more line, written after the batch run.\n')
    sub = os.path.join(w.src, 'notes')
    imatch(w, 'state', 'import', '--subtree', './notes/', '--lexicon',
           lexicon, '-o', w.state, *records)
    imatch(w, 'state', 'import', '--subtree', '../x', '--lexicon', lexicon,
           '-o', w.state, *records, code=2)
    d = w.daemon(source=sub)
    st = settled(w)
    n = documents(sub)
    check(status_int(st, 'documents') == n and
          status_int(st, 'cached') == n - 1,
          '%d of the %d documents from the imported state: %s'
          % (n - 1, n, st))
    want = scan(w.imatch, sub,
                ['--lexicon', os.path.join(w.state, 'lexicon')])
    got = cluster_sets(w.mnt)
    check(got and got == want,
          'the view equals imatch scan of the subtree:\nview:\n%s\nscan:\n%s'
          % (fmt_clusters(got), fmt_clusters(want)))
    d.umount()
    d.check_log()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
