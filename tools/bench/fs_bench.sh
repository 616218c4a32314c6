#!/bin/sh
# The figures of issue 3 at 10k and 100k documents (or the counts given):
#     tools/bench/fs_bench.sh [BUILD_DIR [DOCS...]]
# BUILD_DIR defaults to ./build; each run prints its figures (see fs_bench.py).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 10000 100000
for n in "$@"; do
	echo "== $n documents"
	python3 "$here/fs_bench.py" --docs "$n" "$build/fs/imatchfs" "$build/tools/imatch"
done
