#!/bin/sh
# Near-duplicates arriving in a mounted share: a base tree (by default the
# copyright files of the installed packages, one per package directory) is
# mounted with -o state=; once the status says converged, N files (default
# 6000) that are the same 400 words of the GPL plus a word of their own
# (tools/bench/neardup_remove.sh --tree, WORDS=distinct) are copied into a
# new directory by one `cp`, in name order or (ORDER=reverse) the reverse,
# as `cp` from a tmpfs directory (newest first) does. Prints the wall time
# and the daemon's CPU time until the status counts them all and says
# converged, and how often the lexicon was built again meanwhile (the tree
# grew: every document is signed again). LEXICON=FILE mounts with that
# lexicon (-o lexicon=): never built again. KIND=copies makes the N files
# exact copies of the base tree's files instead, taken in turn (a folder
# of documents copied into the share); BASE=DIR takes DIR's files (no
# subdirectories) as the base tree. The status is polled every
# 50 ms, as scripts do. DEADLINE (seconds, default 3600) bounds each wait;
# always unmounts.
#
#   tools/bench/neardup_add.sh IMATCHFS [N]
set -eu

[ $# -ge 1 ] || { echo "usage: neardup_add.sh IMATCHFS [N]" >&2; exit 2; }
imatchfs=$1
n=${2:-6000}
deadline=${DEADLINE:-3600}
here=$(cd "$(dirname "$0")" && pwd)
command -v fusermount3 >/dev/null || { echo "neardup_add: needs fusermount3" >&2; exit 1; }

work=$(mktemp -d /tmp/neardup-add.XXXXXX)
src=$work/src
mnt=$work/mnt
mkdir -p "$src/base" "$mnt" "$work/state"
pid=
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true
	fi
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [ -n "${BASE:-}" ]; then
	cp -r "$BASE"/. "$src/base/"
else
	for f in /usr/share/doc/*/copyright; do
		[ -f "$f" ] || continue
		d=$(basename "$(dirname "$f")")
		cp "$f" "$src/base/$d"
	done
fi
if [ "${KIND:-near}" = copies ]; then
	mkdir "$work/new"
	set -- "$src"/base/*
	nbase=$#
	i=0
	while [ $i -lt "$n" ]; do
		eval "f=\${$((i % nbase + 1))}"
		cp "$f" "$work/new/c$i-$(basename "$f")"
		i=$((i + 1))
	done
else
	WORDS=distinct "$here/neardup_remove.sh" --tree "$work/new" "$n"
fi

now() { date +%s.%N; }
cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' \
		"/proc/$pid/stat"
}
field() { sed -n "s/^$1: //p" "$work/st"; }
# wait_for [DOCS]: until the status says converged (and counts DOCS).
wait_for() {
	w0=$(now)
	while :; do
		cat "$mnt/status" >"$work/st" 2>/dev/null || true
		if [ "$(field converged)" = yes ] &&
			{ [ -z "${1:-}" ] || [ "$(field documents)" = "$1" ]; }; then
			break
		fi
		if [ "$(echo "$(now) - $w0 > $deadline" | bc)" = 1 ]; then
			echo "neardup_add: no convergence in ${deadline} s" >&2
			grep -E '^(documents|pending|converged):' "$work/st" >&2
			exit 1
		fi
		sleep 0.05
	done
}

opts=state=$work/state${LEXICON:+,lexicon=$LEXICON}
"$imatchfs" -f -o "$opts" "$src" "$mnt" 2>"$work/log" &
pid=$!
while ! mountpoint -q "$mnt"; do
	kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
	sleep 0.02
done
wait_for
base=$(field documents)
relex0=$(field relexicons)
t0=$(now)
c0=$(cpu)
mkdir "$src/new"
if [ "${ORDER:-name}" = reverse ]; then
	(cd "$work/new" && ls | sort -r | xargs cp -t "$src/new")
else
	(cd "$work/new" && ls | sort | xargs cp -t "$src/new")
fi
wait_for $((base + n))
t1=$(now)
c1=$(cpu)
echo "base: $base documents; added: $n ${KIND:-near}  order: ${ORDER:-name}  lexicon: ${LEXICON:-built by the daemon}"
echo "converge after adding: $(echo "$t1 - $t0" | bc) s (daemon CPU $(echo "$c1 - $c0" | bc) s; lexicon built again $(($(field relexicons) - relex0)) times)"
