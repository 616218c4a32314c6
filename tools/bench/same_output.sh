#!/bin/sh
# Whether a speed-up changed any output: runs two imatch binaries (an old
# build, say main's, and the new one) over the same trees and compares, byte
# for byte, `scan --json` (-j 1, -j 2, and -j 2 with other parameters),
# `dupes --json`, the file `lexicon build` writes, `sign --lexicon` of every
# file (with the old binary's lexicon of the first tree) and `terms` of every
# file. Prints one line per difference and exits 1 if there is one.
#
#   tools/bench/same_output.sh OLD NEW DIR [DIR...]
#
# An old build: git worktree add /tmp/old main && (cd /tmp/old &&
#   meson setup b -Dtests=disabled && ninja -C b tools/imatch)
set -eu
[ $# -ge 3 ] || { echo "usage: same_output.sh OLD NEW DIR [DIR...]" >&2; exit 2; }
old=$1 new=$2
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
n=0
# run NAME CMD...: CMD's stdout and stderr under each binary, compared
run() {
	name=$1
	shift
	for b in old new; do
		eval bin=\$$b
		"$bin" "$@" >"$out/$name.$b" 2>&1 || true
	done
	if ! cmp -s "$out/$name.old" "$out/$name.new"; then
		echo "DIFFERENT: $*"
		fail=1
	fi
}
lex0=
for d in "$@"; do
	n=$((n + 1))
	run "scan1.$n" scan --json -j 1 "$d"
	run "scan2.$n" scan --json -j 2 "$d"
	run "scank.$n" scan --json -j 2 -k 4 --keep 0.5 --min-word-len 3 "$d"
	run "dupes.$n" dupes --json -j 2 "$d"
	for b in old new; do
		eval bin=\$$b
		"$bin" lexicon build -j 2 -o "$out/lex.$n.$b" "$d" >/dev/null 2>&1 || true
	done
	if ! cmp -s "$out/lex.$n.old" "$out/lex.$n.new"; then
		echo "DIFFERENT: lexicon build $d"
		fail=1
	fi
	[ -n "$lex0" ] || lex0=$out/lex.$n.old
	find "$d" -type f ! -name '.*' | sort >"$out/files.$n"
	for b in old new; do
		eval bin=\$$b
		xargs -d '\n' "$bin" sign --lexicon "$lex0" <"$out/files.$n" \
			>"$out/sign.$n.$b" 2>&1 || true
		xargs -d '\n' "$bin" terms <"$out/files.$n" \
			>"$out/terms.$n.$b" 2>&1 || true
	done
	for k in sign terms; do
		if ! cmp -s "$out/$k.$n.old" "$out/$k.$n.new"; then
			echo "DIFFERENT: $k of every file under $d"
			fail=1
		fi
	done
	echo "$d: $(wc -l <"$out/files.$n") files compared"
done
[ $fail = 0 ] && echo "same output"
exit $fail
