#!/usr/bin/env python3
"""The size-first exact tier (issue 8 item 1), measured: bytes read and wall
time of `imatch scan` on a tree of large binary files of unique sizes, beside
sha1sum over the same files (every byte read once) and, when given, another
imatch binary (the behaviour before: every binary file read whole), all in
the same run.

    tools/bench/exact_bench.py IMATCH [OLD_IMATCH] [--dir DIR] [--repeat N]

The tree (made once in DIR, default /tmp/imatch-exact-bench): BINS binary
files of unique sizes between 1 and 4 MB (default 100, about 250 MB), 8
pairs of byte-identical 1 MB binaries (the candidates: their size is
shared), and 40 short text documents (so that there is a lexicon and the
scan signs). Bytes read are the process's own read(2) bytes, its children
(the extraction helpers) included: rchar of /proc/PID/io, read when it has
exited and before it is reaped. Time is the best of --repeat rounds over a
warm page cache; each round runs every command once, so that load from
elsewhere hits all alike. Both imatch binaries must print the same clusters.
"""
import argparse
import os
import random
import subprocess
import sys
import time

MB = 1 << 20


def make_tree(root, bins):
    done = os.path.join(root, '.complete-%d' % bins)
    if os.path.exists(done):
        return
    subprocess.run(['rm', '-rf', root], check=True)
    rng = random.Random(8)
    os.makedirs(os.path.join(root, 'media'))
    os.makedirs(os.path.join(root, 'docs'))
    sizes = rng.sample(range(1 * MB, 4 * MB), bins)
    for i, size in enumerate(sizes):
        with open(os.path.join(root, 'media', 'u%03d.bin' % i), 'wb') as f:
            f.write(b'\0' + rng.randbytes(size - 1))
    for i in range(8):
        data = b'\0' + rng.randbytes(MB + 100 * i)
        for copy in ('a', 'b'):
            with open(os.path.join(root, 'media', 'pair%d-%s.bin' % (i, copy)),
                      'wb') as f:
                f.write(data)
    words = [''.join(rng.choice('abcdefghijklmnopqrstuvwxyz')
                     for _ in range(rng.randint(5, 9))) for _ in range(5000)]
    for i in range(40):
        text = ' '.join(rng.choice(words) for _ in range(300))
        with open(os.path.join(root, 'docs', 'd%02d.txt' % i), 'w') as f:
            f.write(text + '\n')
    open(done, 'w').close()


def run(cmd):
    """Run @cmd; return (stdout, seconds, bytes read by it and its children)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    t = time.monotonic() - t0
    with open('/proc/%d/io' % p.pid) as f:
        io = dict(line.split(': ') for line in f.read().splitlines())
    if p.wait() != 0:
        sys.exit('exact_bench: %s failed' % ' '.join(cmd))
    return out, t, int(io['rchar'])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('imatch')
    ap.add_argument('old', nargs='?', help='an imatch that hashes every file')
    ap.add_argument('--dir', default=os.environ.get('IMATCH_EXACT_BENCH',
                                                    '/tmp/imatch-exact-bench'))
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--bins', type=int, default=100)
    a = ap.parse_args()
    root = os.path.join(a.dir, 'tree')
    make_tree(root, a.bins)
    files = sorted(os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns
                   if not n.startswith('.'))
    total = sum(os.path.getsize(f) for f in files)
    cmds = [('sha1sum (every byte once)', ['sha1sum'] + files)]
    if a.old:
        cmds.append(('imatch scan, before (OLD_IMATCH)',
                     [os.path.abspath(a.old), 'scan', root]))
    cmds.append(('imatch scan, size first', [os.path.abspath(a.imatch), 'scan', root]))
    best = {name: (1e9, 0) for name, _ in cmds}
    outs = {}
    for _ in range(a.repeat):
        for name, cmd in cmds:
            out, t, read = run(cmd)
            outs[name] = out
            best[name] = (min(best[name][0], t), read)
    if a.old:
        same = outs[cmds[1][0]] == outs[cmds[2][0]]
        if not same:
            sys.exit('exact_bench: the two imatch binaries print different '
                     'clusters')
    print('tree: %d files, %.1f MB (%d binaries of unique sizes, 8 identical '
          'pairs, 40 texts); best of %d' % (len(files), total / 1e6, a.bins,
                                           a.repeat))
    base_t, base_r = best[cmds[0][0]]
    print('%-44s %12s %8s %9s %9s' % ('command', 'read MB', 'time s',
                                      'read/sha1', 'time/sha1'))
    for name, _ in cmds:
        t, r = best[name]
        print('%-44s %12.1f %8.2f %9.3f %9.3f' % (name, r / 1e6, t, r / base_r,
                                                  t / base_t))
    print('clusters: %d (the 8 pairs)%s' % (
        len(outs[cmds[-1][0]].splitlines()),
        '; both imatch binaries print the same' if a.old else ''))


if __name__ == '__main__':
    main()
