#!/bin/sh
# The filesystem's figures (issues 3, 10) at 10k and 100k documents, in one
# run (or at the counts given):
#     tools/bench/fs_bench.sh [BUILD_DIR [DOCS,DOCS...]]
# BUILD_DIR defaults to ./build; see fs_bench.py for what is printed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
docs=${2:-10000,100000}
exec python3 "$here/fs_bench.py" --docs "$docs" "$build/fs/imatchfs" "$build/tools/imatch"
