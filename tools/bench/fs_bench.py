#!/usr/bin/env python3
"""Benchmarks of the imatchfs daemon (issues 3, 10). Prints figures; asserts
nothing.

    fs_bench.py [--docs N[,N...]] [--changes N] [--work DIR] [-o OPT]
                [--only mount,restart,latency,walk,rss] IMATCHFS IMATCH

Figures, for each generated tree of N documents (default 10000,100000; about
a tenth of them reformatted near-duplicates of another, 100 per directory):
  scan_s            `imatch scan` on the tree, wall time
  mount_view_s      mount with an empty state directory until status shows
                    every document signed and nothing pending
  restart_view_s    the same after a clean unmount, served from the cache
  latency_ms        right after a full walk (`ls -lR`, so every entry is in
                    the kernel's caches): write of a new near-duplicate -> it
                    appears in its original's by-doc/.../dupes/ (median, p99,
                    over --changes)
  latency_rm_ms     unlink of every second copy -> its entry, cached by the
                    kernel (lstat), is gone: the invalidation path
  ls_lR_s / find_s  over the mount, and over the same view copied to disk
                    as real symlinks and files (cp -a), best of 3, warm
  rss_per_doc_b     daemon VmRSS / N, and (VmRSS - VmRSS of a 20-document
                    mount) / N, with the mean path length beside it
and, over the sizes given, in the same run:
  growth_per_doc_b  (VmRSS at the largest N - VmRSS at the smallest) / the
                    difference in documents, after a restart from the cache
                    and the save that follows it

Each tree is kept in WORK/imatchfs-bench-N (--work, default /tmp) and reused when it
already holds N documents.
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'mount'))
from util import (Corpus, Daemon, encode_member, is_mounted, read_status,  # noqa: E402
                  status_int)

PER_DIR = 100


def generate(root, n, seed=7):
    """n documents, 100 per directory, about 10% near-duplicates of an
    earlier document. Returns the relative paths and {copy: original}."""
    marker = os.path.join(root, '.generated-%d' % n)
    corpus = Corpus(seed=seed)
    rng = random.Random(seed)
    paths, twins = [], {}
    for i in range(n):
        paths.append('d%03d/s%02d/doc%06d.txt' % (i // (PER_DIR * 100), (i // PER_DIR) % 100, i))
    if os.path.exists(marker):
        with open(marker) as f:
            for line in f:
                a, b = line.rstrip('\n').split('\t')
                twins[a] = b
        return paths, twins
    shutil.rmtree(root, ignore_errors=True)
    texts = []
    for i, p in enumerate(paths):
        full = os.path.join(root, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if i > 10 and rng.random() < 0.1:
            j = rng.randrange(i)
            text = corpus.near_duplicate(texts[j] if j < len(texts) and texts[j]
                                         else open(os.path.join(root, paths[j])).read(), rng)
            twins[p] = paths[j]
        else:
            text = corpus.document(rng)
        texts.append(text if i < 2000 else None)
        with open(full, 'w') as f:
            f.write(text)
    with open(marker, 'w') as f:
        for a, b in twins.items():
            f.write('%s\t%s\n' % (a, b))
    return paths, twins


def settled(mnt, n, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            st = read_status(mnt)
            done = (status_int(st, 'signed') or 0) + (status_int(st, 'rejected') or 0)
            if status_int(st, 'pending') == 0 and done >= n:
                return st
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit('not settled after %ds: %s' % (timeout, read_status(mnt)))


def saved(mnt, timeout):
    end = time.monotonic() + timeout
    while (status_int(read_status(mnt), 'saves') or 0) < 1:
        if time.monotonic() > end:
            raise SystemExit('no save after %ds' % timeout)
        time.sleep(0.05)


def mount(args, src, mnt, state, log):
    # As `imatchfs SRC MNT` mounts: without auto_unmount, directories are
    # opened by the kernel alone (ops.c); every run unmounts in a finally.
    d = Daemon(args.imatchfs, src, mnt, state=state, log=log, opts=args.opts,
               auto_unmount=False)
    t0 = time.monotonic()
    d.start()
    return d, t0


def rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def best_of(cmd, n=3):
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.monotonic() - t0)
    return min(times)


def fig(name, value, note=''):
    print('%-18s %s%s' % (name + ':', value, ('   # ' + note) if note else ''))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('imatchfs')
    ap.add_argument('imatch')
    ap.add_argument('--docs', default='10000,100000',
                    help='document counts, comma-separated')
    ap.add_argument('--changes', type=int, default=200)
    ap.add_argument('--work')
    ap.add_argument('--only', default='mount,restart,latency,walk,rss')
    ap.add_argument('--timeout', type=int, default=3600)
    ap.add_argument('-o', dest='opts', action='append', default=[],
                    help='extra imatchfs -o option (repeatable)')
    args = ap.parse_args()
    args.imatchfs, args.imatch = os.path.abspath(args.imatchfs), os.path.abspath(args.imatch)
    only = set(args.only.split(','))
    sizes = [int(x) for x in args.docs.split(',')]
    fig('cpus', os.cpu_count())
    results = {}
    for n in sizes:
        print('== %d documents' % n)
        results[n] = run_size(args, n, only)
    print('== summary')
    for n in sizes:
        r = results[n]
        for key in ('ls_lR', 'find'):
            if key in r:
                fig('%s_ratio_%dk' % (key, n // 1000), '%.2f' % r[key],
                    'mount / the view copied to disk, warm, best of 3')
    rss = [(n, results[n]['rss']) for n in sizes if 'rss' in results[n]]
    if len(rss) > 1 and rss[-1][0] != rss[0][0]:
        (n0, r0), (n1, r1) = rss[0], rss[-1]
        plen = results[n1]['path_len']
        fig('growth_per_doc_b', '%.0f' % ((r1 - r0) / (n1 - n0)),
            'VmRSS %d -> %d docs, after a restart; mean path %.0f bytes'
            % (n0, n1, plen))


def run_size(args, n, only):
    """The figures for one tree of @n documents; returns the ones the
    summary needs."""
    out = {}
    work = os.path.join(args.work or '/tmp', 'imatchfs-bench-%d' % n)
    src = os.path.join(work, 'src')
    os.makedirs(work, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='imatchfs-bench-run-')
    mnt, state = os.path.join(tmp, 'mnt'), os.path.join(tmp, 'state')
    os.mkdir(mnt)
    os.mkdir(state)
    log = os.path.join(tmp, 'daemon.log')

    t0 = time.monotonic()
    paths, twins = generate(src, n)
    fig('docs', n, '%d near-duplicate copies; tree made in %.1f s'
        % (len(twins), time.monotonic() - t0))

    daemons = []
    try:
        if 'mount' in only or 'restart' in only:
            t0 = time.monotonic()
            r = subprocess.run([args.imatch, 'scan', src], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
            fig('scan_s', '%.2f' % (time.monotonic() - t0),
                'imatch scan %s (exit %d); clusters: %d'
                % (src, r.returncode, len(r.stdout.splitlines())))

        d, t0 = mount(args, src, mnt, state, log)
        daemons.append(d)
        st = settled(mnt, n, args.timeout)
        fig('mount_view_s', '%.2f' % (time.monotonic() - t0),
            'empty state; clusters: %s' % st.get('clusters'))
        if 'rss' in only:
            fig('rss_kb', rss_kb(d.proc.pid))

        if 'restart' in only:
            d.umount()
            d, t0 = mount(args, src, mnt, state, log)
            daemons.append(d)
            st = settled(mnt, n, args.timeout)
            fig('restart_view_s', '%.3f' % (time.monotonic() - t0),
                'cached: %s' % st.get('cached'))

        if 'rss' in only:
            # Steady state: after the save that follows the scan (it builds
            # the state image in memory, then gives it back).
            saved(mnt, args.timeout)
            rss = rss_kb(d.proc.pid) * 1024
            out['rss'] = rss
            out['path_len'] = statistics.mean(len(p) for p in paths)
            small = os.path.join(tmp, 'small')
            generate(small, 20)
            smnt, sstate = os.path.join(tmp, 'smnt'), os.path.join(tmp, 'sstate')
            os.mkdir(smnt)
            os.mkdir(sstate)
            sd, _ = mount(args, small, smnt, sstate, log)
            daemons.append(sd)
            settled(smnt, 20, 600)
            saved(smnt, 600)
            base = rss_kb(sd.proc.pid) * 1024
            sd.umount()
            plen = statistics.mean(len(p) for p in paths)
            fig('rss_per_doc_b', '%.0f' % (rss / n),
                'VmRSS %.1f MiB after restart / %d docs' % (rss / 2**20, n))
            fig('rss_delta_per_doc_b', '%.0f' % ((rss - base) / n),
                '(VmRSS - %.1f MiB of a 20-doc mount) / docs; mean path %.0f bytes'
                % (base / 2**20, plen))

        if 'walk' in only:
            real = os.path.join(tmp, 'real')
            t0 = time.monotonic()
            subprocess.run(['cp', '-a', mnt + '/.', real], check=True)
            copy_s = time.monotonic() - t0
            n_entries = sum(len(ds) + len(fs) for _, ds, fs in os.walk(real))
            fig('view_entries', n_entries, 'copied to disk in %.1f s' % copy_s)
            for name, cmd in (('ls_lR_s', ['ls', '-lR']), ('find_s', ['find'])):
                fm = best_of(cmd + [mnt])
                fd = best_of(cmd + [real])
                fig(name, '%.3f mount, %.3f disk' % (fm, fd), 'ratio %.2f' % (fm / fd))
                out[name[:-2]] = fm / fd
            shutil.rmtree(real)

        if 'latency' in only:
            # Every entry, attribute and listing cached first.
            subprocess.run(['ls', '-lR', mnt], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            rng = random.Random(99)
            corpus = Corpus(seed=7)
            lat, lat_rm = [], []
            os.makedirs(os.path.join(src, 'bench-latency'), exist_ok=True)
            originals = [p for p in paths if p not in twins]
            for i in range(args.changes):
                orig = rng.choice(originals)
                with open(os.path.join(src, orig)) as f:
                    text = f.read()
                rel = 'bench-latency/copy%04d.txt' % i
                want = encode_member(rel)
                dupes = os.path.join(mnt, 'by-doc', orig, 'dupes')
                data = corpus.near_duplicate(text, rng).encode()
                t0 = time.monotonic()
                with open(os.path.join(src, rel), 'wb') as f:
                    f.write(data)
                while True:
                    try:
                        if want in os.listdir(dupes):
                            break
                    except OSError:
                        pass
                    if time.monotonic() - t0 > 30:
                        print('latency: %s never appeared in %s' % (rel, dupes))
                        break
                    time.sleep(0.0005)
                lat.append((time.monotonic() - t0) * 1000)
                # Removal: the entry is in the kernel's dcache now (lstat), so
                # it goes away only if the daemon invalidates it.
                if i % 2:
                    member = os.path.join(dupes, want)
                    os.lstat(member)
                    t0 = time.monotonic()
                    os.unlink(os.path.join(src, rel))
                    while os.path.lexists(member):
                        if time.monotonic() - t0 > 90:
                            print('latency: %s never went away' % member)
                            break
                        time.sleep(0.0005)
                    lat_rm.append((time.monotonic() - t0) * 1000)
            for name, v, what in (('latency_ms', lat, 'new near-duplicate -> in dupes/ (readdir)'),
                                  ('latency_rm_ms', lat_rm, 'unlink -> gone from dupes/ (lstat)')):
                v.sort()
                fig(name, 'median %.1f, p99 %.1f, max %.1f'
                    % (statistics.median(v), v[min(len(v) - 1, int(len(v) * 0.99))], v[-1]),
                    '%s, %d changes' % (what, len(v)))
            shutil.rmtree(os.path.join(src, 'bench-latency'))
    finally:
        for d in daemons:
            d.cleanup()
        if not any(is_mounted(p) for p in (mnt, os.path.join(tmp, 'smnt'))):
            shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == '__main__':
    main()
