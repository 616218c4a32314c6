#!/usr/bin/env python3
"""Where a first scan's time goes, against sha1sum over the same files, on a
shared machine (issue 9 item 5). Prints figures; asserts nothing.

    stage_budget.py [--rounds N] IMATCH DIR

Each round runs every command once over DIR (warm page cache), and a
command's ratio is the median over the rounds of sha1sum's CPU time (user +
sys) over its own in that round: on this project's VM the host's speed moved
1.6x from one minute to the next, while the commands of one round meet the
same load. Rows:

  cat              reading the files and nothing else
  find + sha1sum   sha1sum over the files that find lists: the walk a
                   user's own hashing of a tree pays, which imatch scan
                   does itself (the sha1sum row gets its list for free)
  lexicon build    walk, read, tokenize, count document frequencies, build
                   the lexicon: the first pass of a first scan
  first scan       imatch scan -j 1: that pass, then signing from the kept
                   term ids, sketches, exact hashes, the index and the output
  first scan K=0   the same without randomized lexicons (-k 0): what the
                   coordinates besides the first cost

A ratio of 1 or more is as fast as sha1sum or faster. Both columns are
medians over the rounds: against sha1sum handed the list of files, and
against find + sha1sum, which walks the tree as imatch scan does (on a
tree of one small file per directory the walk alone is a tenth of a scan).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu(cmd, stdin=None):
    """CPU seconds of one run of cmd, its children's included."""
    before = child_cpu()
    with open(stdin, 'rb') if stdin else open(os.devnull, 'rb') as f:
        subprocess.run(cmd, stdin=f, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    return child_cpu() - before


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--rounds', type=int, default=11)
    ap.add_argument('imatch')
    ap.add_argument('dir')
    a = ap.parse_args()

    paths = sorted(os.path.join(d, f)
                   for d, _, fs in os.walk(a.dir) for f in fs
                   if not f.startswith('.')
                   and not any(p.startswith('.')
                               for p in os.path.relpath(d, a.dir).split(os.sep)
                               if p != '.'))
    size = sum(os.path.getsize(p) for p in paths)
    with tempfile.TemporaryDirectory() as work:
        files = os.path.join(work, 'files')
        with open(files, 'wb') as f:
            f.write(b''.join(os.fsencode(p) + b'\0' for p in paths))
        lex = os.path.join(work, 'lex')
        rows = [
            ('sha1sum', (['xargs', '-0', 'sha1sum'], files)),
            ('cat', (['xargs', '-0', 'cat'], files)),
            ('find + sha1sum',
             (['sh', '-c', 'find "$1" -mindepth 1 -name ".*" -prune -o '
               '-type f -print0 | xargs -0 sha1sum', 'sh', a.dir], None)),
            ('imatch lexicon build -j 1',
             ([a.imatch, 'lexicon', 'build', '-j', '1', '-o', lex, a.dir],
              None)),
            ('imatch scan -j 1', ([a.imatch, 'scan', '-j', '1', a.dir], None)),
            ('imatch scan -j 1 -k 0',
             ([a.imatch, 'scan', '-j', '1', '-k', '0', a.dir], None)),
        ]
        cpu(*rows[1][1])  # warm the page cache
        times = {name: [] for name, _ in rows}
        for _ in range(a.rounds):
            for name, (cmd, stdin) in rows:
                times[name].append(cpu(cmd, stdin))
    load = open('/proc/loadavg').read().split()[:3]
    print(f'{a.dir}: {len(paths)} files, {size / 1e6:.1f} MB; '
          f'{a.rounds} rounds; load average {" ".join(load)}')
    print()
    print('| command | CPU ms (median) | sha1sum / it | find + sha1sum / it |')
    print('|---|---:|---:|---:|')
    for name, _ in rows:
        t = times[name]
        ratios = [statistics.median(b / x for b, x in zip(times[base], t)
                                    if x > 0)
                  for base in ('sha1sum', 'find + sha1sum')]
        print(f'| `{name}` | {statistics.median(t) * 1000:.0f} '
              f'| {ratios[0]:.2f} | {ratios[1]:.2f} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
