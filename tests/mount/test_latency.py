#!/usr/bin/env python3
"""`ls` over the mount as fast as over a disk: what a reader of the mount
waits for while the daemon works on a large tree. Each test failed on the
daemon before its fix, by ten times its bound or more.

    test_latency.py IMATCHFS IMATCH [TEST...]
    test_latency.py --list

Same habits as test_mount.py (tests/mount/util.py). The trees are of many
short near-duplicates, which make the removal plan costly; the bounds are
generous (a loaded host must not fail them), and mean nothing under
valgrind, where the tests skip.
"""

import contextlib
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from util import (VALGRIND, Skip, check, poll, read_status,  # noqa: E402
                  run_tests, status_int)

TESTS = {}


def test(fn):
    TESTS[fn.__name__[len('test_'):]] = fn
    return fn


def short_near_duplicates(src, n, family=200, figures=False):
    """@n texts of 25 made-up words, in families of @family that differ by
    one word, 1000 per directory (dNNN/nNNNNN.txt). With @figures each
    also ends with an amount of its own, as payslips do: near-duplicates
    of each other, none of them redundant (the removal plan keeps a text
    whose figures differ from its keeper's)."""
    rng = random.Random(7)
    sy, vo = 'bcdfghklmnprstvz', 'aeiou'
    vocab = sorted({''.join(rng.choice(sy) + rng.choice(vo)
                            for _ in range(rng.randint(2, 4))) for _ in range(6000)})
    base = None
    for i in range(n):
        if i % family == 0:
            base = rng.sample(vocab, 25)
        words = list(base)
        words[rng.randrange(len(words))] = rng.choice(vocab)
        if figures:
            words += ['total', '%d.%02d' % (i, i % 100)]
        d = os.path.join(src, 'd%03d' % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'n%06d.txt' % i), 'w') as f:
            f.write(' '.join(words) + '\n')


@contextlib.contextmanager
def source_in_memory(w):
    """SOURCE on a tmpfs where we may mount one (root): 20,000 files took
    9 to 13 s to write to this host's disk, 2 s to a tmpfs. Unmounted after
    the test's daemons."""
    mounted = os.geteuid() == 0 and subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', 'size=256m', 'tmpfs', w.src],
        capture_output=True).returncode == 0
    try:
        yield
    finally:
        if mounted:
            for d in w.daemons:
                d.cleanup()
            subprocess.run(['umount', w.src])


def converged(w, docs):
    def ok():
        st = read_status(w.mnt)
        return (st.get('converged') == 'yes' and status_int(st, 'documents') == docs,
                st)
    return poll(ok, 'status to say converged: yes with %d documents' % docs,
                timeout=120)


def timed(fn):
    t = time.monotonic()
    fn()
    return time.monotonic() - t


def read_file(path):
    with open(path) as f:
        return f.read()


@test
def test_status_quick_after_a_change(w):
    """`cat status` after one new document in a tree of 20,000 short
    near-duplicates: the removal plan it counts was made again from every
    document's links, each verified again against the sketches, where only
    its keepers' decide anything (2.0 s here, now 0.06 s)."""
    if VALGRIND:
        raise Skip('a bound in seconds means nothing under valgrind')
    with source_in_memory(w):
        n = 20000
        short_near_duplicates(w.src, n)
        d = w.daemon()
        converged(w, n)
        new = os.path.join(w.src, 'd000', 'new.txt')
        with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
            text = f.read()
        with open(new, 'w') as f:
            f.write(text.replace(' ', ' extra ', 1))
        worst = 0.0
        end = time.monotonic() + 60
        while time.monotonic() < end:
            t = time.monotonic()
            st = read_status(w.mnt)
            worst = max(worst, time.monotonic() - t)
            if st.get('converged') == 'yes' and status_int(st, 'documents') == n + 1:
                break
            time.sleep(0.05)
        print('worst status read %.3f s' % worst)
        check(status_int(st, 'documents') == n + 1, 'the new document never came: %s' % st)
        check(worst < 0.5, 'a read of status took %.2f s after one new document '
              'among %d short near-duplicates' % (worst, n))
        d.umount()


@test
def test_lookups_never_wait_on_status(w):
    """While status is read in a loop and documents come in, no lookup or
    listing of the mount waits more than half a second. The removal plan
    that status counts takes seconds on 20,000 short payslips (each is a
    keeper: their figures differ); made under the tree's lock, held shared,
    it made the first writer queued for that lock (the watcher adding a
    document, a save) wait, and every lookup behind that writer (1.9 s
    here, now 0.05 s)."""
    if VALGRIND:
        raise Skip('a bound in seconds means nothing under valgrind')
    with source_in_memory(w):
        n = 20000
        short_near_duplicates(w.src, n, figures=True)
        d = w.daemon()
        converged(w, n)
        with open(os.path.join(w.src, 'd000', 'n000001.txt')) as f:
            text = f.read()
        stop = time.monotonic() + 4
        status_worst = [0.0]

        def reader():
            while time.monotonic() < stop:
                status_worst[0] = max(status_worst[0], timed(
                    lambda: read_file(os.path.join(w.mnt, 'status'))))

        def writer():
            i = 0
            while time.monotonic() < stop:
                with open(os.path.join(w.src, 'd000', 'new%03d.txt' % i), 'w') as f:
                    f.write(text.replace(' ', ' extra%d ' % i, 1))
                i += 1
                time.sleep(0.3)

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        dirs = sorted(os.listdir(os.path.join(w.mnt, 'by-doc')))
        worst, what, i = 0.0, None, 0
        try:
            while time.monotonic() < stop:
                # A name never looked up, and a listing not yet cached: each
                # is asked of the daemon.
                p = os.path.join(w.mnt, 'by-doc', 'missing%d' % i)
                dt = timed(lambda: os.path.exists(p))
                if dt > worst:
                    worst, what = dt, 'a lookup of ' + p
                p = os.path.join(w.mnt, 'by-doc', dirs[i % len(dirs)])
                dt = timed(lambda: os.listdir(p))
                if dt > worst:
                    worst, what = dt, 'a listing of ' + p
                i += 1
                time.sleep(0.02)
        finally:
            for t in threads:
                t.join()
        print('worst wait %.3f s (%s) in %d rounds; worst status read %.2f s'
              % (worst, what, i, status_worst[0]))
        check(worst < 0.5, '%s waited %.2f s while status was read (a read took up to '
              '%.2f s)' % (what, worst, status_worst[0]))
        d.umount()


if __name__ == '__main__':
    sys.exit(run_tests(TESTS, sys.argv[1:]))
