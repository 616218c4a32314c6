#!/usr/bin/env python3
"""Symlink race: swap a directory of the source with a symlink to a directory
outside it, as fast as possible, while its files keep changing, and check
that the daemon never reads anything outside the source (issue 12, defect 2).

    symlink_race.py IMATCHFS IMATCH [--short] [--seconds N] [--files N]
                                    [--seed N] [--deadline N] [--keep]

SOURCE/race/ holds --files documents (default 20); SOURCE/race.lnk is a
symlink to OUTSIDE/, a sibling of SOURCE holding files of the same names whose
contents are byte-identical to documents in SOURCE/twins/. The driver
exchanges race and race.lnk atomically (renameat2 RENAME_EXCHANGE) and
rewrites the real directory's files between swaps, for --seconds (default 60;
--short: 5, for CI), so the daemon keeps opening race/NAME while race is now
a directory, now a symlink out.

Evidence, two kinds:
  - inotify on OUTSIDE/ counts every open and read of its files, by anyone
    (the driver never opens them after it has written them);
  - twice a second the view is checked: a file of twins/ shown with a dupe
    means the daemon signed an outside file as race/NAME.
After the race, race/ is left a directory and the view must converge to
`imatch scan` of the tree.

Exit 0 nothing outside was read, 1 otherwise, 77 without FUSE.
"""

import argparse
import ctypes
import ctypes.util
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (IN_ACCESS, IN_OPEN, Fail, Inotify, Pool, World, converge,  # noqa: E402
                    log, read_status, run_main, settle, summary_of)

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchanger():
    libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)

    def exchange(a, b):
        if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b),
                          RENAME_EXCHANGE):
            e = ctypes.get_errno()
            raise OSError(e, 'renameat2(RENAME_EXCHANGE) %s %s: %s' % (a, b, os.strerror(e)))
    return exchange


def twins_with_dupes(mnt, twins):
    """The twins/ documents the view shows with a dupe (each should have none)."""
    out = []
    for t in twins:
        try:
            dupes = os.listdir(os.path.join(mnt, 'by-doc', 'twins', t, 'dupes'))
        except OSError:
            continue
        if dupes:
            out.append('twins/%s <-> %s' % (t, ', '.join(sorted(dupes))))
    return out


def run(argv):
    ap = argparse.ArgumentParser(prog='symlink_race.py')
    ap.add_argument('imatchfs')
    ap.add_argument('imatch')
    ap.add_argument('--short', action='store_true', help='5 s (CI)')
    ap.add_argument('--seconds', type=float)
    ap.add_argument('--files', type=int, default=20)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--deadline', type=int, default=60)
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args(argv)
    seconds = a.seconds or (5 if a.short else 60)
    w = World(os.path.abspath(a.imatchfs), os.path.abspath(a.imatch), 'race')
    outside = os.path.join(w.top, 'outside')
    ok = False
    watch = None
    try:
        exchange = exchanger()
        rng = random.Random(a.seed)
        pool = Pool(2 * a.files + 20, seed=a.seed)
        texts = [t for pair in pool.texts for t in pair[:1]]
        race = os.path.join(w.src, 'race')
        lnk = os.path.join(w.src, 'race.lnk')
        twins_dir = os.path.join(w.src, 'twins')
        for d in (race, twins_dir, outside):
            os.mkdir(d)
        names = ['f%02d.txt' % i for i in range(a.files)]
        inside = {}
        twins = []
        for i, n in enumerate(names):
            inside[n] = ('%sinside copy %d\n' % (texts[i], i)).encode()
            with open(os.path.join(race, n), 'wb') as f:
                f.write(inside[n])
            secret = ('%soutside only %d\n' % (texts[a.files + i], i)).encode()
            with open(os.path.join(outside, n), 'wb') as f:
                f.write(secret)
            with open(os.path.join(twins_dir, n), 'wb') as f:
                f.write(secret)
            twins.append(n)
        for i in range(20):
            with open(os.path.join(w.src, 'other%02d.txt' % i), 'wb') as f:
                f.write(texts[2 * a.files + i].encode())
        os.symlink(outside, lnk)
        watch = Inotify(outside, IN_OPEN | IN_ACCESS)

        d = w.daemon()
        settle(w.mnt, a.deadline)
        log('live: %s' % summary_of(read_status(w.mnt)))
        bad = twins_with_dupes(w.mnt, twins)
        if bad:
            raise Fail('before the race, twins already have dupes: %s' % bad)

        t0 = time.monotonic()
        swaps = writes = checks = 0
        seen_bad = []
        real = race          # where the real directory is now
        next_check = t0 + 0.5
        while time.monotonic() - t0 < seconds:
            exchange(race, lnk)
            swaps += 1
            real = lnk if real == race else race
            for n in rng.sample(names, min(3, len(names))):
                with open(os.path.join(real, n), 'wb') as f:
                    f.write(inside[n])
                writes += 1
            if time.monotonic() >= next_check:
                checks += 1
                watch.poll()  # before the kernel's queue overflows
                bad = twins_with_dupes(w.mnt, twins)
                if bad:
                    seen_bad.append((time.monotonic() - t0, bad))
                next_check = time.monotonic() + 0.5
        if real != race:
            exchange(race, lnk)
            swaps += 1
        took = time.monotonic() - t0
        opens = watch.poll()
        log('race: %d swaps and %d writes in %.1f s (%.0f swaps/s); view checked %d times'
            % (swaps, writes, took, swaps / took, checks))
        fails = []
        if opens:
            kinds = {}
            for mask, name in opens:
                k = 'open' if mask & IN_OPEN else 'read'
                kinds[k] = kinds.get(k, 0) + 1
            fails.append('files outside the source were opened or read %d times (%s), '
                         'e.g. %s' % (len(opens), ', '.join('%s %d' % kv for kv in
                                                           sorted(kinds.items())),
                                      ', '.join(sorted({n for _, n in opens})[:5])))
        if seen_bad:
            fails.append('the view showed outside files as near-duplicates %d times; first at '
                         '%.1f s: %s' % (len(seen_bad), seen_bad[0][0], seen_bad[0][1][:3]))
        # The race is over: the view must come back to the truth.
        try:
            secs = converge(w.imatch, w.src, w.mnt, w.state, a.deadline,
                            'after the race, the view')
            log('converged %.1f s after the race' % secs)
        except Fail as e:
            fails.append(str(e))
        bad = twins_with_dupes(w.mnt, twins)
        if bad:
            fails.append('after the race the view still shows %s' % bad[:3])
        log('outside opens/reads in total: %d' % len(watch.poll()))
        d.umount()
        if fails:
            raise Fail('\n'.join(fails))
        ok = True
    finally:
        if watch:
            watch.close()
        w.close(keep=a.keep or not ok)


if __name__ == '__main__':
    sys.exit(run_main(run, sys.argv[1:], 'symlink_race'))
