#!/usr/bin/env python3
"""Churn: change a mounted source as fast as a user's scripts can, then check
that the view converges to `imatch scan` of the final tree (issue 12, defect 1).

    churn.py IMATCHFS IMATCH [--short] [--seconds N] [--rate N] [--seed N]
                             [--deadline N] [--keep] [--first-scan] [--readers]
                             [--files N] [--plan-loops N] [--probe]
                             [--show-status PREFIX,...]

Builds a tree of --files pool documents (families of near-duplicates spread
over nested directories), mounts it, waits until it is live, then for --seconds
drives --rate changes per second (default 1,000 for 60 s; --short: 5 s, for
CI): creates, rewrites, editor-style replaces (write a temporary name, rename
it over), exact copies, renames within and across directories, deletes, new
directories, directory moves between depths, whole subtrees removed, and
bursts of files created in a new directory that is renamed at once. Then it polls, up to
--deadline seconds, until by-doc/ lists exactly the tree's documents and
clusters/ equals the scan; on failure it prints what differs and what the
daemon's status claimed meanwhile. With --first-scan the churn starts as soon
as the mount is there, during the daemon's first scan (one pass: it reads
the files before the lexicon exists and signs them after, while the watcher
applies what changed meanwhile). With --readers, threads read the view while
it churns, as a user's scripts would: lookups of names that do not exist,
and what asks for the removal plan (a document's by-doc listing, its keeper
read with readlink and user.imatch.keeper, a listing of redundant/); the
worst wait of each kind is printed after the churn. With --plan-loops N,
N processes loop without a pause over what asks for the plan (the four
reads above, in turn), while the driver times, every half second, how long
a new file takes to show in by-doc/, and, after the churn (the loops going
on), how long status takes to say `converged: yes`; median and worst are
printed. --probe times new files into by-doc/ so without the loops. With
--show-status, the status fields whose names start with one of the prefixes
are printed once the view converged (e.g. --show-status rereads,reused).

Exit 0 converged, 1 not (or an error), 77 without FUSE.
"""

import argparse
import contextlib
import os
import random
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Fail, Pool, World, converge, log, read_status, run_main,  # noqa: E402
                    settle, summary_of)


class Tree:
    """The driver's model of the source: directories and files it made."""

    def __init__(self, src, pool, rng):
        self.src, self.pool, self.rng = src, pool, rng
        self.dirs = ['']
        self.files = []
        self.serial = 0
        self.counts = {}

    def p(self, rel):
        return os.path.join(self.src, rel)

    def name(self, prefix, ext=''):
        self.serial += 1
        return '%s%d%s' % (prefix, self.serial, ext)

    def write(self, rel):
        self.serial += 1
        with open(self.p(rel), 'wb') as f:
            f.write(self.pool.text(self.rng, self.serial))

    def count(self, op, n=1):
        self.counts[op] = self.counts.get(op, 0) + n

    def depth(self, d):
        return d.count('/') + 1 if d else 0

    # ---- Operations; each returns the number of changes it made ----

    def create(self):
        rel = os.path.join(self.rng.choice(self.dirs), self.name('f', '.txt'))
        self.write(rel)
        self.files.append(rel)
        return 1

    def rewrite(self):
        if not self.files:
            return self.create()
        self.write(self.rng.choice(self.files))
        return 1

    def replace(self):
        """Editor-style: write .name.tmp, rename it over name."""
        if not self.files:
            return self.create()
        rel = self.rng.choice(self.files)
        d, b = os.path.split(rel)
        tmp = os.path.join(d, '.%s.swp' % b)
        self.write(tmp)
        os.rename(self.p(tmp), self.p(rel))
        return 2

    def replace_older(self):
        """cp -p or tar: a new file with an older mtime renamed over one,
        or one rewritten in place and given an older mtime."""
        if not self.files:
            return self.create()
        rel = self.rng.choice(self.files)
        target = rel
        if self.rng.random() < 0.5:
            d, b = os.path.split(rel)
            target = os.path.join(d, '.%s.part' % b)
        self.write(target)
        old = 946684800 + self.serial  # from 2000-01-01: older than any write
        os.utime(self.p(target), (old, old))
        if target != rel:
            os.rename(self.p(target), self.p(rel))
        return 2

    def copy(self):
        """An exact copy of a file under a new name, as a backup of it is:
        the daemon lends it the result it holds for the original."""
        if not self.files:
            return self.create()
        rel = os.path.join(self.rng.choice(self.dirs), self.name('c', '.txt'))
        shutil.copyfile(self.p(self.rng.choice(self.files)), self.p(rel))
        self.files.append(rel)
        return 1

    def rename_file(self):
        if not self.files:
            return self.create()
        i = self.rng.randrange(len(self.files))
        old = self.files[i]
        new = os.path.join(self.rng.choice(self.dirs), self.name('r', '.txt'))
        os.rename(self.p(old), self.p(new))
        self.files[i] = new
        return 1

    def delete(self):
        if len(self.files) < 50:
            return self.create()
        i = self.rng.randrange(len(self.files))
        os.unlink(self.p(self.files[i]))
        self.files[i] = self.files[-1]
        self.files.pop()
        return 1

    def mkdir(self):
        parent = self.rng.choice([d for d in self.dirs if self.depth(d) < 6] or [''])
        rel = os.path.join(parent, self.name('d'))
        os.mkdir(self.p(rel))
        self.dirs.append(rel)
        return 1

    def move_dir(self):
        """Move a directory (with everything below it) under another one,
        usually to another depth."""
        cands = [d for d in self.dirs if d]
        if not cands:
            return self.mkdir()
        src = self.rng.choice(cands)
        targets = [d for d in self.dirs
                   if d != src and not d.startswith(src + '/') and self.depth(d) < 6]
        dst = os.path.join(self.rng.choice(targets), self.name('m'))
        os.rename(self.p(src), self.p(dst))
        pre = src + '/'
        self.dirs = [dst + d[len(src):] if d == src or d.startswith(pre) else d
                     for d in self.dirs]
        self.files = [dst + f[len(src):] if f.startswith(pre) else f for f in self.files]
        return 1

    def remove_tree(self):
        if len(self.dirs) < 20:
            return self.mkdir()
        for _ in range(5):
            d = self.rng.choice(self.dirs[1:])
            pre = d + '/'
            n = sum(1 for f in self.files if f.startswith(pre))
            if n <= 40:
                break
        else:
            return self.mkdir()
        shutil.rmtree(self.p(d))
        self.dirs = [x for x in self.dirs if x != d and not x.startswith(pre)]
        self.files = [f for f in self.files if not f.startswith(pre)]
        return n + 1

    def burst(self):
        """Create a directory, fill it, and rename it at once (the pattern
        that lost about 30% of the documents)."""
        parent = self.rng.choice([d for d in self.dirs if self.depth(d) < 5] or [''])
        tmp = os.path.join(parent, self.name('incoming'))
        os.mkdir(self.p(tmp))
        n = self.rng.randint(10, 40)
        names = [self.name('b', '.txt') for _ in range(n)]
        for b in names:
            self.write(os.path.join(tmp, b))
        final = os.path.join(parent, self.name('batch'))
        os.rename(self.p(tmp), self.p(final))
        self.dirs.append(final)
        self.files += [os.path.join(final, b) for b in names]
        return n + 2

    OPS = [('create', 20), ('rewrite', 18), ('replace', 10), ('replace_older', 6),
           ('copy', 6), ('rename_file', 15),
           ('delete', 20), ('mkdir', 5), ('move_dir', 8), ('remove_tree', 2), ('burst', 2)]

    def step(self):
        names = [o for o, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        op = self.rng.choices(names, weights)[0]
        n = getattr(self, op)()
        self.count(op, n)
        return n


def build(tree, ndirs, nfiles):
    for _ in range(ndirs):
        tree.mkdir()
    for _ in range(nfiles):
        tree.create()
    tree.counts.clear()


class Readers:
    """Threads reading the view of @p tree under @p mnt until stop(), each
    kind of read timed; the worst of each kind is kept."""

    def __init__(self, mnt, tree):
        by_doc = os.path.join(mnt, 'by-doc')
        self.mnt, self.tree, self.by_doc = mnt, tree, by_doc
        self.worst = {}
        self.count = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.kinds = {
            'lookup': lambda d, i: os.path.exists(os.path.join(by_doc, 'missing%d' % i)),
            'listdir by-doc/DOC': lambda d, i: os.listdir(d),
            'readlink by-doc/DOC/keeper': lambda d, i: os.readlink(os.path.join(d, 'keeper')),
            'getxattr user.imatch.keeper': lambda d, i: os.getxattr(d, 'user.imatch.keeper'),
            'listdir redundant/': lambda d, i: os.listdir(os.path.join(mnt, 'redundant')),
        }
        self.threads = [threading.Thread(target=self.loop, args=(k, n), daemon=True)
                        for n, k in enumerate(self.kinds)]
        for t in self.threads:
            t.start()

    def loop(self, kind, seed):
        rng = random.Random(seed)
        fn = self.kinds[kind]
        i = 0
        while not self.done.is_set():
            files = self.tree.files
            doc = os.path.join(self.by_doc, rng.choice(files)) if files else self.by_doc
            t = time.monotonic()
            with contextlib.suppress(OSError):  # gone meanwhile; no keeper
                fn(doc, i)
            dt = time.monotonic() - t
            with self.lock:
                self.count[kind] = self.count.get(kind, 0) + 1
                self.worst[kind] = max(self.worst.get(kind, 0.0), dt)
            i += 1
            time.sleep(0.01)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()
        for kind in self.kinds:
            log('  worst %s: %.3f s of %d' % (kind, self.worst.get(kind, 0.0),
                                             self.count.get(kind, 0)))


def plan_loop(by_doc, redundant, files, seed, stop, reads):
    """One process: ask for the plan over and over, with no pause."""
    rng = random.Random(seed)
    kinds = [lambda d: os.listdir(d),
             lambda d: os.readlink(os.path.join(d, 'keeper')),
             lambda d: os.getxattr(d, 'user.imatch.keeper'),
             lambda d: os.listdir(redundant)]
    i = 0
    while not stop.is_set():
        with contextlib.suppress(OSError):  # gone meanwhile; no keeper
            kinds[i % len(kinds)](os.path.join(by_doc, rng.choice(files)))
        i += 1
        with reads.get_lock():
            reads.value += 1


class PlanLoops:
    """@n processes looping on plan-asking reads (plan_loop()) until
    stop(); meanwhile probe() times new files into by-doc/."""

    def __init__(self, mnt, tree, n):
        import multiprocessing
        ctx = multiprocessing.get_context('fork')
        self.mnt, self.tree = mnt, tree
        self.stop_ev = ctx.Event()
        self.reads = ctx.Value('l', 0)
        files = list(tree.files)
        self.procs = [ctx.Process(target=plan_loop, daemon=True,
                                  args=(os.path.join(mnt, 'by-doc'),
                                        os.path.join(mnt, 'redundant'), files, k,
                                        self.stop_ev, self.reads))
                      for k in range(n)]
        for p in self.procs:
            p.start()
        self.waits = []
        self.pending = []  # (probe file, made at)
        self.next_probe = time.monotonic() + 0.5

    def probe(self):
        """Called by the driver between changes: make a probe file every
        half second, and look whether the waiting ones are in by-doc/."""
        now = time.monotonic()
        if now >= self.next_probe:
            # In the top directory, which no change moves or removes.
            rel = self.tree.name('probe', '.txt')
            self.tree.write(rel)
            self.pending.append((rel, time.monotonic()))
            self.next_probe = now + 0.5
        still = []
        for rel, t in self.pending:
            if os.path.lexists(os.path.join(self.mnt, 'by-doc', rel, 'file')):
                self.waits.append(time.monotonic() - t)
            else:
                still.append((rel, t))
        self.pending = still

    def converged(self, deadline):
        """Seconds until status says converged: yes."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline:
            with contextlib.suppress(OSError):
                if read_status(self.mnt).get('converged') == 'yes':
                    return time.monotonic() - t0
            time.sleep(0.02)
        return float('inf')

    def stop(self):
        self.stop_ev.set()
        for p in self.procs:
            p.join()

    def report(self, conv):
        w = sorted(self.waits)
        if w:
            log('  new file into by-doc/: median %.3f s, 90%% %.3f s, worst %.3f s of %d '
                '(%d made at the end not shown yet)'
                % (w[len(w) // 2], w[len(w) * 9 // 10], w[-1], len(w), len(self.pending)))
        log('  converged: yes %.2f s after the churn; %d plan-asking reads; '
            'load %.2f %.2f %.2f' % ((conv, self.reads.value) + os.getloadavg()))


def run(argv):
    ap = argparse.ArgumentParser(prog='churn.py')
    ap.add_argument('imatchfs')
    ap.add_argument('imatch')
    ap.add_argument('--short', action='store_true', help='5 s and a small tree (CI)')
    ap.add_argument('--seconds', type=float)
    ap.add_argument('--rate', type=int, default=1000, help='changes per second to aim at')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--deadline', type=int, default=120,
                    help='seconds to wait for convergence')
    ap.add_argument('--keep', action='store_true', help='keep the tmp directory')
    ap.add_argument('--first-scan', action='store_true',
                    help='churn during the first scan, not after it')
    ap.add_argument('--readers', action='store_true',
                    help='read the view meanwhile; print the worst waits')
    ap.add_argument('--files', type=int, help='files to start from (1500; --short: 200)')
    ap.add_argument('--plan-loops', type=int, default=0,
                    help='processes asking for the plan without a pause; time new '
                    'files into by-doc/ and convergence')
    ap.add_argument('--probe', action='store_true',
                    help='time new files into by-doc/ and convergence, without plan loops')
    ap.add_argument('--show-status', metavar='PREFIX,...', default='',
                    help='status fields to print at the end, by name prefix')
    a = ap.parse_args(argv)
    seconds = a.seconds or (5 if a.short else 60)
    w = World(os.path.abspath(a.imatchfs), os.path.abspath(a.imatch), 'churn')
    ok = False
    try:
        rng = random.Random(a.seed)
        pool = Pool(60 if a.short else 200, seed=a.seed)
        tree = Tree(w.src, pool, rng)
        build(tree, 10 if a.short else 40, a.files or (200 if a.short else 1500))
        log('tree: %d files in %d directories; mounting' % (len(tree.files), len(tree.dirs)))
        d = w.daemon()
        if not a.first_scan:
            settle(w.mnt)
        log('%s: %s' % ('mounted' if a.first_scan else 'live',
                        summary_of(read_status(w.mnt))))
        readers = Readers(w.mnt, tree) if a.readers else None
        loops = (PlanLoops(w.mnt, tree, a.plan_loops)
                 if a.plan_loops or a.probe else None)
        t0 = time.monotonic()
        changes = 0
        while True:
            now = time.monotonic() - t0
            if now >= seconds:
                break
            # Pace to the rate, in small batches.
            ahead = changes - now * a.rate
            if ahead > 0:
                time.sleep(min(ahead / a.rate, 0.05))
                if loops:
                    loops.probe()
                continue
            changes += tree.step()
        took = time.monotonic() - t0
        if readers:
            readers.stop()
        if loops:
            conv = loops.converged(a.deadline)
            loops.stop()
            loops.report(conv)
        log('churn: %d changes in %.1f s = %.0f changes/s; final tree %d files in %d dirs'
            % (changes, took, changes / took, len(tree.files), len(tree.dirs)))
        log('  by kind: ' + ', '.join('%s %d' % kv for kv in sorted(tree.counts.items())))
        if changes / took < a.rate * 0.9:
            log('warning: the driver reached only %.0f of %d changes/s' % (changes / took, a.rate))
        secs = converge(w.imatch, w.src, w.mnt, w.state, a.deadline,
                        'after %d changes, the view' % changes)
        st = read_status(w.mnt)
        log('converged %.1f s after the churn: %s' % (secs, summary_of(st)))
        prefixes = tuple(x for x in a.show_status.split(',') if x)
        if prefixes:
            log('  status: ' + ', '.join('%s %s' % kv for kv in st.items()
                                         if kv[0].startswith(prefixes)))
        d.umount()
        ok = True
    finally:
        w.close(keep=a.keep or not ok)


if __name__ == '__main__':
    sys.exit(run_main(run, sys.argv[1:], 'churn'))
