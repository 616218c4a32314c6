#!/usr/bin/env python3
"""CPU time (user + system) of two builds of one command, interleaved.

    cpu_pair.py [--rounds N] OLD NEW ARGS...

runs `OLD ARGS...` and `NEW ARGS...` N times each, alternating which goes
first, and prints each one's median CPU milliseconds and the median of the
per-round ratios NEW/OLD. Interleaving puts both builds under the same load
of a shared machine, which a run of one build after the other does not:
here two runs of one binary in a row differ by a few percent, interleaved
by about 0.5%. Output to stdout and stderr is discarded; a failing command
stops the run.

Example (a first scan of the licences, the build before a change and
after):
    tools/bench/cpu_pair.py --rounds 60 /tmp/old/imatch build/tools/imatch \\
        scan -j 1 /tmp/imatch-bench-licu/corpus
"""
import argparse
import resource
import statistics
import subprocess
import sys


def cpu_ms(argv):
    """CPU milliseconds of one run of @argv and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (after.ru_utime - before.ru_utime +
                   after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    old, new = [a.old] + a.args, [a.new] + a.args
    # One run each first: page cache and dynamic loading warm for both.
    cpu_ms(old)
    cpu_ms(new)
    olds, news, ratios = [], [], []
    for i in range(a.rounds):
        if i % 2:
            n = cpu_ms(new)
            o = cpu_ms(old)
        else:
            o = cpu_ms(old)
            n = cpu_ms(new)
        olds.append(o)
        news.append(n)
        ratios.append(n / o if o else 1.0)
    print("old %.1f ms  new %.1f ms  new/old %.3f  (medians of %d rounds)"
          % (statistics.median(olds), statistics.median(news),
             statistics.median(ratios), a.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
