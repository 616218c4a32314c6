#!/usr/bin/env python3
"""Kill: SIGKILL the daemon at random moments and check that every restart
loads its state and converges (issue 12, defects 1 and 7).

    kill.py IMATCHFS IMATCH [--short] [--kills N] [--files N] [--seed N]
                            [--deadline N] [--keep]

Two halves of --kills each (default 50 + 50; --short: 3 + 3, for CI):

 1. During a first scan: with an empty state directory, mount, SIGKILL at a
    random moment of the time a first scan takes (measured once at the
    start), mount again on the same state directory.
 2. During a change burst: on a live mount, drive about 1,000 changes/s for
    2 s (churn.py's mix) and SIGKILL at a random moment of it; the burst goes
    on to its end while no daemon runs; mount again.

Each restart must mount (a state file refused as corrupt fails the run), and
the view must converge to `imatch scan` of the tree within --deadline
seconds; then it is unmounted cleanly (fusermount3 -u, exit status 0). The
tool counts the restarts that reused cached signatures and the temporary
files the kills left in the state directory.

Exit 0 all converged, 1 not, 77 without FUSE.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (DEAD_MOUNTS, Fail, Pool, World, converge, log, read_status, run_main,  # noqa: E402
                    settle, status_int, summary_of, wait_unmounted)
from churn import Tree, build  # noqa: E402


def restart(w, what, deadline):
    """Mount again on the same state; converge; unmount cleanly. Returns the
    restarted daemon's status once converged."""
    try:
        d = w.daemon(auto_unmount=True)
    except Fail as e:
        # Killed before fusermount3 even started, the mount it then made
        # is dead: remove it and mount again (fusermount3's doing). The
        # daemon names it either by its errno or, when the dead mount is
        # still listed as ours, as an imatchfs mount already there, or (fs/main.c
        # since 7c4d9b4) as a dead imatchfs mount.
        if not any(m in str(e) for m in ('not connected', 'already an imatchfs mount',
                                         'a dead imatchfs mount')):
            raise
        DEAD_MOUNTS.append(w.mnt)
        subprocess.run(['fusermount3', '-u', '-z', w.mnt], capture_output=True)
        wait_unmounted(w.mnt)
        d = w.daemon(auto_unmount=True)
    secs = converge(w.imatch, w.src, w.mnt, w.state, deadline, what)
    st = read_status(w.mnt)
    d.umount()
    return st, secs


STUCK = []


def kill_now(d, what):
    d.kill()
    d.proc.wait()
    dead = len(DEAD_MOUNTS)
    if not wait_unmounted(d.mnt):
        STUCK.append(what)
    elif len(DEAD_MOUNTS) > dead:
        log('%s left a dead mount (fusermount3 did not remove it)' % what)


def tmp_leftovers(state):
    return [n for n in os.listdir(state) if '.tmp' in n]


def run(argv):
    ap = argparse.ArgumentParser(prog='kill.py')
    ap.add_argument('imatchfs')
    ap.add_argument('imatch')
    ap.add_argument('--short', action='store_true', help='3 + 3 kills, a small tree (CI)')
    ap.add_argument('--kills', type=int, help='kills per half (default 50)')
    ap.add_argument('--files', type=int, help='documents in the tree (default 3000)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--deadline', type=int, default=120)
    ap.add_argument('--keep', action='store_true')
    a = ap.parse_args(argv)
    kills = a.kills or (3 if a.short else 50)
    nfiles = a.files or (300 if a.short else 3000)
    w = World(os.path.abspath(a.imatchfs), os.path.abspath(a.imatch), 'kill')
    ok = False
    rng = random.Random(a.seed)
    try:
        pool = Pool(60 if a.short else 200, seed=a.seed)
        tree = Tree(w.src, pool, random.Random(a.seed + 1))
        build(tree, 30, nfiles)
        # How long a first scan takes, to spread the kills over it.
        t0 = time.monotonic()
        d = w.daemon(auto_unmount=True)
        settle(w.mnt, a.deadline)
        first = time.monotonic() - t0
        d.umount()
        log('tree: %d documents; a first scan takes %.2f s' % (len(tree.files), first))

        cached_restarts = 0
        worst = 0.0
        for i in range(kills):
            shutil.rmtree(w.state)
            os.mkdir(w.state)
            at = rng.uniform(0, first * 1.2)
            d = w.daemon(start=False, auto_unmount=True)
            d.start(wait=False)
            time.sleep(at)
            kill_now(d, 'first scan kill %d at %.2f s' % (i + 1, at))
            st, secs = restart(w, 'first scan, kill %d at %.2f s: the restarted view'
                               % (i + 1, at), a.deadline)
            worst = max(worst, secs)
            if (status_int(st, 'cached') or 0) > 0:
                cached_restarts += 1
            log('first scan kill %d at %.2f s: restart converged in %.1f s (cached %s)'
                % (i + 1, at, secs, st.get('cached')))
        log('first-scan kills: %d, all converged (worst %.1f s), %d restarts reused '
            'cached signatures' % (kills, worst, cached_restarts))

        burst_secs = 2.0
        cached_restarts = 0
        worst = 0.0
        for i in range(kills):
            d = w.daemon(auto_unmount=True)
            settle(w.mnt, a.deadline)
            at = rng.uniform(0, burst_secs)
            done = threading.Event()
            changes = [0]

            def burst():
                t0 = time.monotonic()
                try:
                    while time.monotonic() - t0 < burst_secs:
                        ahead = changes[0] - (time.monotonic() - t0) * 1000
                        if ahead > 0:
                            time.sleep(min(ahead / 1000, 0.05))
                            continue
                        changes[0] += tree.step()
                finally:
                    done.set()
            th = threading.Thread(target=burst)
            th.start()
            time.sleep(at)
            kill_now(d, 'burst kill %d at %.2f s' % (i + 1, at))
            th.join()
            st, secs = restart(w, 'burst kill %d at %.2f s (%d changes): the restarted view'
                               % (i + 1, at, changes[0]), a.deadline)
            worst = max(worst, secs)
            if (status_int(st, 'cached') or 0) > 0:
                cached_restarts += 1
            log('burst kill %d at %.2f s of %d changes: restart converged in %.1f s '
                '(cached %s)' % (i + 1, at, changes[0], secs, st.get('cached')))
        left = tmp_leftovers(w.state)
        log('burst kills: %d, all converged (worst %.1f s), %d restarts reused cached '
            'signatures; %d temporary files left in the state directory%s'
            % (kills, worst, cached_restarts, len(left),
               (': ' + ' '.join(sorted(left)[:5])) if left else ''))
        log('final status: %s' % summary_of(st))
        if DEAD_MOUNTS:
            log('%d kills left a dead mount that fusermount3 did not remove (unmounted '
                'lazily by this tool)' % len(DEAD_MOUNTS))
        if STUCK:
            raise Fail('%d of %d kills left the mount in place for 30 s: %s'
                       % (len(STUCK), 2 * kills, '; '.join(STUCK[:5])))
        ok = True
    finally:
        w.close(keep=a.keep or not ok)


if __name__ == '__main__':
    sys.exit(run_main(run, sys.argv[1:], 'kill'))
