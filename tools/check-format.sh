#!/usr/bin/env bash
# Fail when a C file of core/ or fs/ differs from what clang-format makes of
# it with the project's .clang-format; print the differences. With --fix,
# rewrite them instead.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(find core fs -name '*.[ch]' | sort)
if [ "${1:-}" = --fix ]; then
	clang-format -i --style=file "${files[@]}"
	exit 0
fi
bad=0
for f in "${files[@]}"; do
	if ! clang-format --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" -; then
		bad=1
	fi
done
if [ "$bad" = 1 ]; then
	echo "check-format: run tools/check-format.sh --fix" >&2
	exit 1
fi
