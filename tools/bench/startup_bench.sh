#!/bin/sh
# Process start-up of imatch: the shared libraries it loads and the time of
# `imatch --version` (the least of ROUNDS runs, default 20, wall and CPU),
# for each binary given, measured in the same run, alternating, so that load
# from elsewhere hits all alike. Prints figures; asserts nothing.
#
#   tools/bench/startup_bench.sh IMATCH [IMATCH...]
#
# Give an older build beside the current one to see a change, e.g. one made
# before poppler was loaded with dlopen (commit 87c4f34's parent):
#   git archive OLD | tar -x -C /tmp/old && (cd /tmp/old &&
#   meson setup b -Dtests=disabled && ninja -C b tools/imatch)
set -eu
[ $# -ge 1 ] || { echo "usage: startup_bench.sh IMATCH [IMATCH...]" >&2; exit 2; }
rounds=${ROUNDS:-20}
command -v python3 >/dev/null || { echo "startup_bench: needs python3" >&2; exit 1; }

python3 - "$rounds" "$@" <<'EOF'
import resource
import subprocess
import sys
import time

rounds, bins = int(sys.argv[1]), sys.argv[2:]
best = {b: (1e9, 1e9) for b in bins}
for _ in range(rounds):
    for b in bins:
        t0 = time.perf_counter()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([b, "--version"], stdout=subprocess.DEVNULL, check=True)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter() - t0
        cpu = (c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
        best[b] = (min(best[b][0], wall), min(best[b][1], cpu))
print("| binary | shared libraries (ldd) | --version wall, least of %d | CPU |"
      % rounds)
print("|---|---:|---:|---:|")
for b in bins:
    ldd = subprocess.run(["ldd", b], stdout=subprocess.PIPE, text=True).stdout
    print("| %s | %d | %.1f ms | %.1f ms |"
          % (b, len(ldd.strip().splitlines()), best[b][0] * 1e3,
             best[b][1] * 1e3))
EOF
