#!/usr/bin/env python3
"""The daemon's memory per document for several builds, in one run
(issue 10 item 3). Prints figures; asserts nothing.

    rss_pair.py [--docs N,M] [--work DIR] [--rounds R] IMATCHFS [IMATCHFS...]

The figure is fs_bench.py's growth_per_doc_b: (VmRSS at M documents - VmRSS
at N) / (M - N), each read after a start from the state cache and the save
that follows it. fs_bench signs every tree anew for each build; here each
tree's cache is made once (by the first build, kept in
WORK/imatchfs-bench-N/state-cache) and every build starts from a copy of
it, the builds taking turns at each size, so that a pair costs a few
minutes instead of half an hour. With --rounds R each VmRSS is the smallest
of R starts (a start's VmRSS varies by some 0.5 MiB: thread arenas). The
builds must read the same cache format, and every document must come
from it: a run stops, naming the template, when a build reads it as stale
(one made by a version of another IM_EXTRACT_VERSION).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fs_bench import fig, generate, mount, rss_kb, saved, settled  # noqa: E402
from util import status_int  # noqa: E402


def cached_state(exe, src, n, work, opts):
    """The state directory of a finished mount of @src, made once."""
    state = os.path.join(work, 'state-cache')
    if os.path.exists(os.path.join(state, '.complete')):
        return state
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    mnt = tempfile.mkdtemp(prefix='imatchfs-rss-mnt-')
    args = argparse.Namespace(imatchfs=exe, opts=opts)
    d, _ = mount(args, src, mnt, state, os.path.join(work, 'state-cache.log'))
    try:
        settled(mnt, n, 3600)
        saved(mnt, 3600)
    finally:
        d.umount()
        os.rmdir(mnt)
    open(os.path.join(state, '.complete'), 'w').close()
    return state


def rss_after_restart(exe, src, n, template, opts):
    tmp = tempfile.mkdtemp(prefix='imatchfs-rss-')
    mnt, state = os.path.join(tmp, 'mnt'), os.path.join(tmp, 'state')
    os.mkdir(mnt)
    shutil.copytree(template, state)
    args = argparse.Namespace(imatchfs=exe, opts=opts)
    d, _ = mount(args, src, mnt, state, os.path.join(tmp, 'daemon.log'))
    try:
        st = settled(mnt, n, 3600)
        # A template another version made (another IM_EXTRACT_VERSION) is
        # read as stale: every document is signed again and held fresh, the
        # whole cache is read back at the save, and the figure measures
        # that instead of a start from the cache.
        cached = status_int(st, 'cached_files') or 0
        if cached < n:
            raise SystemExit(
                '%s: %d of %d documents came from the cache in %s: made by '
                'another version? remove it and run again' %
                (exe, cached, n, template))
        saved(mnt, 3600)
        return rss_kb(d.proc.pid) * 1024
    finally:
        d.umount()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('imatchfs', nargs='+')
    ap.add_argument('--docs', default='10000,100000')
    ap.add_argument('--work', default='/tmp')
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('-o', dest='opts', action='append', default=[],
                    help='extra imatchfs -o option (repeatable)')
    args = ap.parse_args()
    exes = [os.path.abspath(e) for e in args.imatchfs]
    n0, n1 = (int(x) for x in args.docs.split(','))
    rss = {e: {} for e in exes}
    plen = 0
    for n in (n0, n1):
        work = os.path.join(args.work, 'imatchfs-bench-%d' % n)
        src = os.path.join(work, 'src')
        paths, _ = generate(src, n)
        plen = statistics.mean(len(p) for p in paths)
        template = cached_state(exes[0], src, n, work, args.opts)
        for r in range(args.rounds):
            for e in exes:
                got = rss_after_restart(e, src, n, template, args.opts)
                rss[e][n] = min(rss[e].get(n, got), got)
                fig('rss_kb', got // 1024, '%d docs, %s' % (n, e))
    base = None
    for e in exes:
        g = (rss[e][n1] - rss[e][n0]) / (n1 - n0)
        base = base or g
        fig('growth_per_doc_b', '%.0f' % g,
            '%s; %.3f of the first; mean path %.0f bytes' % (e, g / base, plen))


if __name__ == '__main__':
    main()
