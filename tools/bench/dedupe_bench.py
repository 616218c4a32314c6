#!/usr/bin/env python3
"""Exact-copy finding: `imatch dedupe` (no --near) beside jdupes, fdupes and
rmlint on the same trees, measured in the same run (best of ROUNDS, warm
cache, each tool once per round in turn so that load hits all alike).
Prints a table of wall-clock times, whether every tool found the same
groups of copies, and a table of CPU times (steadier than wall-clock on a
loaded machine, blind to threads' gain); asserts nothing.

    tools/bench/dedupe_bench.py IMATCH [OTHER_IMATCH] [--rounds N] [--work DIR]
                                [--cold N] [--trees NAME,...]

Trees (built once under --work, default /tmp/imatch-dedupe-bench):
  manuals  the evaluation corpus (tools/eval/fetch_corpus.sh: PostgreSQL,
           Python and Perl documentation, 2,684 files) plus a byte copy of
           every tenth file under copies/;
  licence  4,000 copies of one licence text in 40 directories;
  partial  4,000 generated documents of exactly 24,000 bytes that differ in
           their first line (and every 50th copied), and eight files of
           12 MiB: two pairs of copies and four that differ in their first
           line. Where partial hashing pays: a tool that reads only the
           heads of same-size files reads 16 MB of its 192, not 192.
OTHER_IMATCH (an older build, say) is timed too. The tools missing from the
machine are installed with apt-get when run as root, else left out. Each
tool's count of redundant files is printed beside its time, so that a tool
that found less is seen.

--cold N adds N rounds with a cold cache: before each tool's run, as root,
`sync` and `echo 3 > /proc/sys/vm/drop_caches`, then the tool is run once
on an empty directory (its program and libraries back in the cache, the
tree not) and timed on the tree. Without root the cold table is left out
and says so.
"""
import argparse
import json
import os
import random
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


def build_partial(root):
    rng = random.Random(1)
    lic = os.path.join(HERE, '..', '..', 'tests', 'data', 'demo', 'licenses')
    words = sorted({w for n in os.listdir(lic)
                    for w in open(os.path.join(lic, n), 'rb').read().split()})
    pool = b' '.join(rng.choice(words) for _ in range(400000))
    size = 24000
    os.makedirs(os.path.join(root, 'copies'))
    for i in range(4000):
        d = os.path.join(root, 'docs', '%02d' % (i % 40))
        os.makedirs(d, exist_ok=True)
        at = rng.randrange(len(pool) - size)
        data = (b'Document %04d\n' % i + pool[at:at + size])[:size]
        path = os.path.join(d, 'doc%04d.txt' % i)
        with open(path, 'wb') as f:
            f.write(data)
        if i % 50 == 49:
            shutil.copy2(path, os.path.join(root, 'copies', 'doc%04d.txt' % i))
    big = 12 << 20
    body = (pool * (big // len(pool) + 1))[:big]
    os.makedirs(os.path.join(root, 'big'))
    for i in range(8):
        head = b'Volume %d\n' % (i // 2 if i < 4 else i)
        with open(os.path.join(root, 'big', 'vol%d.txt' % i), 'wb') as f:
            f.write((head + body)[:big])


def tree(work, name, make):
    root = os.path.join(work, name)
    if not os.path.exists(os.path.join(work, name + '.complete')):
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        make(root)
        open(os.path.join(work, name + '.complete'), 'w').close()
    return root


def groups(name, out, cwd):
    """The groups of identical files a tool found, from its report: a set
    of frozensets of absolute paths."""
    lines = out.decode('utf-8', 'surrogateescape').splitlines()
    found = {}
    if name.startswith('imatch'):
        # a plan: each redundant file with its keeper
        for l in lines:
            if l.startswith('{'):
                p = json.loads(l)
                found.setdefault(p['keeper'], {p['keeper']}).add(p['path'])
        return {frozenset(g) for g in found.values()}
    # jdupes, fdupes and rmlint's fdupes output: groups separated by blank
    # lines
    out, g = set(), []
    for l in lines + ['']:
        if l.strip():
            g.append(os.path.join(cwd, l))
        elif g:
            out.add(frozenset(g))
            g = []
    return out


def redundant(gs):
    """Files a tool would remove: all but one of each group."""
    return sum(len(g) - 1 for g in gs)


def drop_caches():
    """Empty the page cache (and dentries, inodes) as root; False if not."""
    try:
        os.sync()
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
        return True
    except OSError:
        return False


def timed(argv, root, cwd):
    """Wall-clock seconds, CPU seconds (user and system, all threads) and
    the standard output of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv + [root], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=cwd)
    out = p.stdout.read()
    p.stdout.close()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, out


def table(title, trees, tools, rounds, work, cold):
    empty = os.path.join(work, 'empty')
    os.makedirs(empty, exist_ok=True)
    print(title + '\n')
    print('| tree | files | ' + ' | '.join(t for t, _ in tools) + ' |')
    print('|---|---:|' + '---:|' * len(tools))
    agree, cpu_rows = [], []
    for name, root in trees:
        nfiles = sum(len(ns) for _, _, ns in os.walk(root))
        best, cpu, found = {}, {}, {}
        for _ in range(rounds):
            for t, argv in tools:
                if cold:
                    drop_caches()
                    subprocess.run(argv + [empty], capture_output=True, cwd=work)
                dt, ct, out = timed(argv, root, work)
                best[t] = min(best.get(t, 1e9), dt)
                cpu[t] = min(cpu.get(t, 1e9), ct)
                found[t] = groups(t, out, work)
        print('| %s | %d | ' % (name, nfiles) +
              ' | '.join('%.3f s (%d)' % (best[t], redundant(found[t]))
                         for t, _ in tools) + ' |')
        cpu_rows.append('| %s | %d | ' % (name, nfiles) +
                        ' | '.join('%.3f s' % cpu[t] for t, _ in tools) + ' |')
        first = tools[0][0]
        differ = [t for t, _ in tools if found[t] != found[first]]
        agree.append('%s: %s' % (name, 'every tool found the same %d groups'
                                 % len(found[first]) if not differ else
                                 'groups differ from %s\'s: %s'
                                 % (first, ', '.join(differ))))
    print('\n(seconds, and in brackets the files the tool would remove)')
    print('\n'.join(agree) + '\n')
    print('CPU time (user and system, all threads), best of the same runs:\n')
    print('| tree | files | ' + ' | '.join(t for t, _ in tools) + ' |')
    print('|---|---:|' + '---:|' * len(tools))
    print('\n'.join(cpu_rows) + '\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('imatch')
    ap.add_argument('other', nargs='?')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--cold', type=int, default=0, metavar='N')
    ap.add_argument('--trees', default='manuals,licence,partial')
    ap.add_argument('--work', default='/tmp/imatch-dedupe-bench')
    a = ap.parse_args()
    missing = [t for t in ('jdupes', 'fdupes', 'rmlint') if not shutil.which(t)]
    if missing and os.geteuid() == 0:
        subprocess.run(['apt-get', 'install', '-y', '-q'] + missing,
                       stdin=subprocess.DEVNULL, capture_output=True)
    os.makedirs(a.work, exist_ok=True)
    make = {'manuals': build_manuals, 'licence': build_licence,
            'partial': build_partial}
    trees = [(n, tree(a.work, n, make[n])) for n in a.trees.split(',')]
    tools = [('imatch', [os.path.abspath(a.imatch), 'dedupe'])]
    if a.other:
        tools.append(('imatch (other)', [os.path.abspath(a.other), 'dedupe']))
    for t, argv in (('jdupes', ['jdupes', '-r', '-q']), ('fdupes', ['fdupes', '-r', '-q']),
                    ('rmlint', ['rmlint', '-o', 'fdupes:stdout'])):
        if shutil.which(t):
            tools.append((t, argv))
    table('Exact copies: best of %d rounds, warm cache, %d cores, load before %s.'
          % (a.rounds, os.cpu_count(), ' '.join('%.2f' % x for x in os.getloadavg())),
          trees, tools, a.rounds, a.work, False)
    if a.cold:
        if drop_caches():
            table('Cold cache (sync; echo 3 > /proc/sys/vm/drop_caches before '
                  'each run, the program warm): best of %d rounds.' % a.cold,
                  trees, tools, a.cold, a.work, True)
        else:
            print('Cold cache: not measured (cannot write /proc/sys/vm/drop_caches: '
                  'not root?)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
