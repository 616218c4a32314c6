#!/usr/bin/env python3
"""Exact-copy finding: `imatch dedupe` (no --near) beside jdupes, fdupes and
rmlint on the same trees, measured in the same run (best of ROUNDS, warm
cache, each tool once per round in turn so that load hits all alike).
Prints a table; asserts nothing.

    tools/bench/dedupe_bench.py IMATCH [OTHER_IMATCH] [--rounds N] [--work DIR]

Trees (built once under --work, default /tmp/imatch-dedupe-bench):
  manuals  the evaluation corpus (tools/eval/fetch_corpus.sh: PostgreSQL,
           Python and Perl documentation, 2,684 files) plus a byte copy of
           every tenth file under copies/;
  licence  4,000 copies of one licence text in 40 directories.
OTHER_IMATCH (an older build, say) is timed too. The tools missing from the
machine are installed with apt-get when run as root, else left out. Each
tool's count of redundant files is printed beside its time, so that a tool
that found less is seen.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build_manuals(root):
    src = subprocess.run([os.path.join(HERE, '..', 'eval', 'fetch_corpus.sh'),
                          os.environ.get('IMATCH_EVAL_CACHE', '/tmp/imatch-eval')],
                         check=True, capture_output=True, text=True).stdout.strip()
    shutil.copytree(os.path.join(src, 'main'), os.path.join(root, 'a'))
    os.makedirs(os.path.join(root, 'copies'))
    files = sorted(os.path.join(d, n) for d, _, ns in os.walk(os.path.join(root, 'a'))
                   for n in ns)
    for i, f in enumerate(files):
        if i % 10 == 9:
            shutil.copy2(f, os.path.join(root, 'copies', '%05d_%s' % (i, os.path.basename(f))))


def build_licence(root):
    text = open(os.path.join(HERE, '..', '..', 'tests', 'data', 'demo', 'licenses',
                             sorted(os.listdir(os.path.join(HERE, '..', '..', 'tests',
                                                            'data', 'demo', 'licenses')))[0]),
                'rb').read()
    for i in range(4000):
        d = os.path.join(root, 'd%02d' % (i % 40))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, 'f%04d.txt' % i), 'wb') as f:
            f.write(text)


def tree(work, name, make):
    root = os.path.join(work, name)
    if not os.path.exists(os.path.join(work, name + '.complete')):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        make(root)
        open(os.path.join(work, name + '.complete'), 'w').close()
    return root


def redundant(name, out):
    """Files a tool would remove, from its report."""
    lines = out.decode('utf-8', 'replace').splitlines()
    if name.startswith('imatch'):
        return sum(1 for l in lines if l.startswith('{'))
    # jdupes, fdupes and rmlint's fdupes output: groups separated by blank
    # lines, all but one member
    groups, n = 0, 0
    for l in lines + ['']:
        if l.strip():
            n += 1
        elif n:
            groups += n - 1
            n = 0
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('imatch')
    ap.add_argument('other', nargs='?')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--work', default='/tmp/imatch-dedupe-bench')
    a = ap.parse_args()
    missing = [t for t in ('jdupes', 'fdupes', 'rmlint') if not shutil.which(t)]
    if missing and os.geteuid() == 0:
        subprocess.run(['apt-get', 'install', '-y', '-q'] + missing,
                       stdin=subprocess.DEVNULL, capture_output=True)
    os.makedirs(a.work, exist_ok=True)
    trees = [('manuals', tree(a.work, 'manuals', build_manuals)),
             ('licence', tree(a.work, 'licence', build_licence))]
    tools = [('imatch', [os.path.abspath(a.imatch), 'dedupe'])]
    if a.other:
        tools.append(('imatch (other)', [os.path.abspath(a.other), 'dedupe']))
    for t, argv in (('jdupes', ['jdupes', '-r', '-q']), ('fdupes', ['fdupes', '-r', '-q']),
                    ('rmlint', ['rmlint', '-o', 'fdupes:stdout'])):
        if shutil.which(t):
            tools.append((t, argv))
    print('Exact copies: best of %d rounds, warm cache, %d cores, load before %s.\n'
          % (a.rounds, os.cpu_count(), ' '.join('%.2f' % x for x in os.getloadavg())))
    print('| tree | files | ' + ' | '.join(t for t, _ in tools) + ' |')
    print('|---|---:|' + '---:|' * len(tools))
    for name, root in trees:
        nfiles = sum(len(ns) for _, _, ns in os.walk(root))
        best, found = {}, {}
        for _ in range(a.rounds):
            for t, argv in tools:
                t0 = time.perf_counter()
                r = subprocess.run(argv + [root], capture_output=True, cwd=a.work)
                dt = time.perf_counter() - t0
                best[t] = min(best.get(t, 1e9), dt)
                found[t] = redundant(t, r.stdout)
        print('| %s | %d | ' % (name, nfiles) +
              ' | '.join('%.3f s (%d)' % (best[t], found[t]) for t, _ in tools) + ' |')
    print('\n(seconds, and in brackets the files the tool would remove)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
