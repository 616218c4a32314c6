#!/bin/sh
# Near-duplicates removed one by one under a mount (what `imatch apply` of a
# dedupe plan does to a mounted share): N documents (default 3000) that are
# the same 400 words of the GPL, each file ending in its own number (distinct
# bytes, one near-duplicate cluster), are mounted with -o state=; once the
# mount's status says converged, all but the first (in name order) are
# removed from the source, and the mount is polled again until it has one
# document and says converged. Prints both times in seconds, wall clock and
# the daemon's CPU time (user + system: less noisy on a shared machine);
# always unmounts.
#
#   tools/bench/neardup_remove.sh IMATCHFS [N]
#   tools/bench/neardup_remove.sh --tree DIR [N]    # only write the tree
#
# WORDS=distinct gives each file a word of its own as well (so no two term
# sets, and no two sketches, are equal: the general case rather than texts
# that differ only in what the tokenizer drops); ORDER=shuffle removes in a
# random order (seeded) instead of name order, ORDER=reverse in reverse name
# order. DEADLINE (seconds, default
# 3600) bounds each wait.
set -eu

usage() {
	echo "usage: neardup_remove.sh IMATCHFS [N] | --tree DIR [N]" >&2
	exit 2
}

# The GPL's first 400 words (or, without it, 400 made-up ones), one line.
words() {
	gpl=/usr/share/common-licenses/GPL-3
	if [ -r "$gpl" ]; then
		tr -cs 'A-Za-z' ' ' <"$gpl" | tr ' ' '\n' | sed '/^$/d' |
			head -n 400 | tr '\n' ' '
	else
		awk 'BEGIN { s = 7; for (i = 0; i < 400; i++) { w = "";
			for (j = 0; j < 4 + i % 5; j++) {
				s = (s * 1103515245 + 12345) % 2147483648;
				w = w sprintf("%c", 97 + int(s / 65536) % 26) }
			printf "%s ", w } }'
	fi
}

# write_tree DIR N: DIR/docNNNNN.txt, N of them.
write_tree() {
	mkdir -p "$1"
	text=$(words)
	awk -v n="$2" -v dir="$1" -v text="$text" -v distinct="${WORDS:-same}" '
	function letters(i,   w) {
		w = ""
		do { w = w sprintf("%c", 97 + i % 26); i = int(i / 26) } while (i)
		return "uniq" w
	}
	BEGIN {
		for (i = 0; i < n; i++) {
			f = sprintf("%s/doc%05d.txt", dir, i)
			extra = distinct == "distinct" ? " " letters(i) : ""
			printf "%s%s\nfile %d\n", text, extra, i > f
			close(f)
		}
	}'
}

[ $# -ge 1 ] || usage
if [ "$1" = --tree ]; then
	[ $# -ge 2 ] || usage
	write_tree "$2" "${3:-3000}"
	exit 0
fi
imatchfs=$1
n=${2:-3000}
deadline=${DEADLINE:-3600}
command -v fusermount3 >/dev/null || { echo "neardup_remove: needs fusermount3" >&2; exit 1; }

work=$(mktemp -d /tmp/neardup.XXXXXX)
src=$work/src
mnt=$work/mnt
mkdir -p "$src" "$mnt" "$work/state"
pid=
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true
	fi
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }

# The daemon's CPU seconds so far (utime + stime, /proc/PID/stat).
cpu() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' \
		"/proc/$pid/stat"
}

# wait_for DOCS: until the status shows DOCS documents and converged: yes.
wait_for() {
	w0=$(now)
	while :; do
		st=$(cat "$mnt/status" 2>/dev/null || true)
		if printf '%s\n' "$st" | grep -qx "documents: $1" &&
			printf '%s\n' "$st" | grep -qx 'converged: yes'; then
			break
		fi
		if [ "$(echo "$(now) - $w0 > $deadline" | bc)" = 1 ]; then
			echo "neardup_remove: no convergence to $1 documents in ${deadline} s" >&2
			printf '%s\n' "$st" | grep -E '^(documents|pending|converged):' >&2
			exit 1
		fi
		sleep 0.05
	done
}

write_tree "$src" "$n"
t0=$(now)
"$imatchfs" -f -o state="$work/state" "$src" "$mnt" 2>"$work/log" &
pid=$!
while ! mountpoint -q "$mnt"; do
	kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
	sleep 0.02
done
wait_for "$n"
t1=$(now)
c1=$(cpu)
(cd "$src" && printf '%s\n' doc*.txt) | sed 1d >"$work/gone"
if [ "${ORDER:-name}" = shuffle ]; then
	awk 'BEGIN { srand(1) } { print rand() "\t" $0 }' "$work/gone" |
		sort -n | cut -f2 >"$work/gone.s"
	mv "$work/gone.s" "$work/gone"
elif [ "${ORDER:-name}" = reverse ]; then
	sort -r "$work/gone" >"$work/gone.s"
	mv "$work/gone.s" "$work/gone"
fi
t2=$(now)
c2=$(cpu)
(cd "$src" && xargs rm -f <"$work/gone")
wait_for 1
t3=$(now)
c3=$(cpu)
echo "documents: $n  words: ${WORDS:-same}  order: ${ORDER:-name}"
echo "converge after mount: $(echo "$t1 - $t0" | bc) s (daemon CPU $c1 s)"
echo "converge after removing all but one: $(echo "$t3 - $t2" | bc) s (daemon CPU $(echo "$c3 - $c2" | bc) s)"
