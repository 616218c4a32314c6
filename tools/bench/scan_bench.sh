#!/bin/sh
# Signing throughput of `imatch scan` beside cat and sha1sum of the same files,
# measured in the same run (the ratios matter, not the absolute times), and
# peak memory per document.
#
#   tools/bench/scan_bench.sh IMATCH [BENCH_DIR]
#
# Corpus (built once, kept in BENCH_DIR, default $IMATCH_BENCH_DIR or
# /tmp/imatch-bench): the evaluation documents of tools/eval/fetch_corpus.sh
# (PostgreSQL 15 HTML manual, Perl pod and man3 pages, Python 3.11 HTML docs:
# 2,684 files, 90 MB) as they are, plus REPLICAS (default 3) lightly perturbed
# replicas (tools/bench/replicate.py: 0.2% of the words replaced by other words
# of the same document), so about 360 MB of real text in about 10,700 files.
#
# Each timing is the best of REPEAT (default 5) rounds over a warm page cache;
# a round runs every command once, so that load from elsewhere hits all alike.
# imatch scan runs with its defaults (K = 4): once as a first scan (no
# lexicon: one pass that builds it from the corpus and signs, what a user's
# first `imatch scan DIR` does) and once with the lexicon given (--lexicon:
# signing alone, what a rescan costs).
# Peak RSS comes from GNU time (installed with apt-get if missing) or, failing
# that, is not reported. Memory per document = (peak RSS of the scan - peak RSS
# of the same command over a one-file tree) / documents.
set -eu

imatch=${1:?usage: scan_bench.sh IMATCH [BENCH_DIR]}
imatch=$(cd "$(dirname "$imatch")" && pwd)/$(basename "$imatch")
bench=${2:-${IMATCH_BENCH_DIR:-/tmp/imatch-bench}}
here=$(cd "$(dirname "$0")" && pwd)
replicas=${REPLICAS:-3}
repeat=${REPEAT:-5}
jobs=$(nproc)

corpus=$bench/corpus
# The script writes its lists, lexicons and one-file tree into BENCH_DIR:
# given the corpus itself, they would land in it and be measured by every
# later run (the copy-free licences carried 2.7 MB of them for three
# sessions, binary files that imatch skips and sha1sum reads).
if [ -f "$bench/.complete" ]; then
	echo "scan_bench: $bench is a corpus (it has .complete): give the directory that holds corpus/" >&2
	exit 2
fi
if [ ! -f "$corpus/.complete" ]; then
	src=$("$here/../eval/fetch_corpus.sh" "${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}")/main
	rm -rf "$corpus"
	python3 "$here/replicate.py" "$src" "$corpus" "$replicas"
	touch "$corpus/.complete"
fi

if [ ! -x /usr/bin/time ] && [ "$(id -u)" = 0 ]; then
	apt-get install -y -q time </dev/null >/dev/null 2>&1 || true
fi
gnutime=
[ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1 && gnutime=/usr/bin/time

list=$bench/files.lst
find "$corpus" -type f ! -name '.*' -print0 | sort -z >"$list"
nfiles=$(tr -cd '\0' <"$list" | wc -c)
bytes=$(xargs -0 cat <"$list" | wc -c)
mb=$(echo "$bytes" | awk '{ printf "%.1f", $1 / 1e6 }')

now() { date +%s.%N; }
# timed CMD...: run CMD once (output discarded), print its wall time
timed() {
	t0=$(now)
	"$@" >/dev/null 2>&1 || { echo "scan_bench: '$*' failed" >&2; exit 1; }
	t1=$(now)
	echo "$t0 $t1" | awk '{ print $2 - $1 }'
}
min() { echo "$1 ${2:-1e9}" | awk '{ print ($1 < $2) ? $1 : $2 }'; }
# rss CMD...: peak RSS in kB of one run of CMD
rss() {
	if [ -n "$gnutime" ]; then
		$gnutime -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }'
	else
		echo 0
	fi
}

cat_all() { xargs -0 cat <"$list"; }
sha_all() { xargs -0 sha1sum <"$list"; }
# sha1sum over the tree as a user runs it: the walk counted too, as it is in
# imatch scan (the rows above read a list made beforehand).
sha_tree() { find "$corpus" -type f ! -name '.*' -print0 | xargs -0 sha1sum; }
# The machine's own ceiling for -j 2 / -j 1: two sha1sum at once, each over
# every other file, against one over all (2.00x on two idle cores; less when
# they share a core's caches or others load the machine).
tr '\0' '\n' <"$list" | awk 'NR % 2 == 1' | tr '\n' '\0' >"$list.a"
tr '\0' '\n' <"$list" | awk 'NR % 2 == 0' | tr '\n' '\0' >"$list.b"
sha_two() {
	xargs -0 sha1sum <"$list.a" >/dev/null &
	xargs -0 sha1sum <"$list.b" >/dev/null
	wait
}
# imatch's own ceiling: two first scans at once, each over every other file
# (--files-from, paths relative to the corpus), against one over all. Each
# half builds its own lexicon and shares nothing with the other: what -j 2
# could reach if nothing of it were serial or shared.
(cd "$corpus" && find . -type f ! -name '.*' -printf '%P\0' | sort -z) >"$list.rel"
tr '\0' '\n' <"$list.rel" | awk 'NR % 2 == 1' | tr '\n' '\0' >"$list.rel.a"
tr '\0' '\n' <"$list.rel" | awk 'NR % 2 == 0' | tr '\n' '\0' >"$list.rel.b"
own_one() { "$imatch" scan -j 1 --files-from "$list.rel" --root "$corpus"; }
own_two() {
	"$imatch" scan -j 1 --files-from "$list.rel.a" --root "$corpus" >/dev/null &
	"$imatch" scan -j 1 --files-from "$list.rel.b" --root "$corpus" >/dev/null
	wait
}

load=$(cut -d" " -f1-3 /proc/loadavg)
lex=$bench/bench.lex
cat_all >/dev/null # warm the cache
# Rounds interleave the commands, so that a change in load from other
# processes hits all of them alike; each keeps its best time.
t_lex= t_cat= t_sha= t_shat= t_sha2= t_j1= t_jn= t_f1= t_fn= t_own1= t_own2=
i=0
while [ $i -lt "$repeat" ]; do
	t_lex=$(min "$(timed "$imatch" lexicon build -j 1 -o "$lex" "$corpus")" "$t_lex")
	t_cat=$(min "$(timed cat_all)" "$t_cat")
	t_sha=$(min "$(timed sha_all)" "$t_sha")
	t_shat=$(min "$(timed sha_tree)" "$t_shat")
	t_sha2=$(min "$(timed sha_two)" "$t_sha2")
	t_f1=$(min "$(timed "$imatch" scan -j 1 "$corpus")" "$t_f1")
	t_fn=$(min "$(timed "$imatch" scan -j "$jobs" "$corpus")" "$t_fn")
	t_j1=$(min "$(timed "$imatch" scan --lexicon "$lex" -j 1 "$corpus")" "$t_j1")
	t_jn=$(min "$(timed "$imatch" scan --lexicon "$lex" -j "$jobs" "$corpus")" "$t_jn")
	t_own1=$(min "$(timed own_one)" "$t_own1")
	t_own2=$(min "$(timed own_two)" "$t_own2")
	i=$((i + 1))
done

# CPU time (user + sys), best of REPEAT: on a machine others load, wall
# time measures them too; CPU time measures only the work.
cpu() {
	[ -n "$gnutime" ] || { echo 0; return; }
	best=
	k=0
	while [ $k -lt "$repeat" ]; do
		$gnutime -o "$bench/time.out" -f "%U %S" "$@" >/dev/null 2>&1
		best=$(min "$(awk '{ print $1 + $2 }' "$bench/time.out")" "$best")
		k=$((k + 1))
	done
	echo "$best"
}
c_sha=$(cpu sh -c "xargs -0 sha1sum <'$list'")
c_f1=$(cpu "$imatch" scan -j 1 "$corpus")
c_j1=$(cpu "$imatch" scan --lexicon "$lex" -j 1 "$corpus")

one=$bench/one
rm -rf "$one"
mkdir -p "$one"
cp "$(head -zn1 "$list" | tr -d '\0')" "$one/"
r_base=$(rss "$imatch" scan --lexicon "$lex" -j 1 "$one")
r_f1=$(rss "$imatch" scan -j 1 "$corpus")
r_fn=$(rss "$imatch" scan -j "$jobs" "$corpus")
r_j1=$(rss "$imatch" scan --lexicon "$lex" -j 1 "$corpus")
r_jn=$(rss "$imatch" scan --lexicon "$lex" -j "$jobs" "$corpus")
r_lex=$(rss "$imatch" lexicon build -j 1 -o "$bench/bench2.lex" "$corpus")
r_sha=$(rss sha1sum "$(head -zn1 "$list" | tr -d '\0')")

echo "Corpus: $corpus: $nfiles files, $mb MB (real documentation text, see the script); $(nproc) cores; $(uname -m); best of $repeat; load average before: $load."
echo
echo "| command | seconds | MB/s | MB/s per core | vs sha1sum per core | peak RSS |"
echo "|---|---:|---:|---:|---:|---:|"
row() { # row NAME SECONDS CORES RSS_KB
	echo "$1 $2 $3 $4 $bytes $t_sha" | awk '{
		n = split($0, f, " ")
		mbs = f[n-1] / f[2] / 1e6; sha = f[n-1] / f[n] / 1e6
		rss = (f[4] > 0) ? sprintf("%.1f MB", f[4] / 1024) : "n/a"
		printf "| %s | %.2f | %.0f | %.0f | %.2f | %s |\n", f[1], f[2], mbs, mbs / f[3], mbs / f[3] / sha, rss }'
}
row "cat" "$t_cat" 1 0 | sed 's/^| cat /| `cat` (xargs) /'
row "sha1sum" "$t_sha" 1 "$r_sha" | sed 's/^| sha1sum /| `sha1sum` (xargs, 1 process at a time) /'
row "shatree" "$t_shat" 1 0 | sed 's/^| shatree /| `find` + `sha1sum` (the walk too) /'
row "lexicon" "$t_lex" 1 "$r_lex" | sed 's/^| lexicon /| `imatch lexicon build -j 1` /'
row "f1" "$t_f1" 1 "$r_f1" | sed 's/^| f1 /| `imatch scan -j 1` (first scan, one pass) /'
row "fn" "$t_fn" "$jobs" "$r_fn" | sed "s/^| fn /| \`imatch scan -j $jobs\` (first scan) /"
row "j1" "$t_j1" 1 "$r_j1" | sed 's/^| j1 /| `imatch scan -j 1 --lexicon` (signing) /'
row "jn" "$t_jn" "$jobs" "$r_jn" | sed "s/^| jn /| \`imatch scan -j $jobs --lexicon\` /"
echo
echo "$t_sha $t_sha2" | awk '{
	printf "Machine ceiling for -j 2 / -j 1: two sha1sum at once over halves of the files against one over all: %.2fx.\n", $1 / $2 }'
echo "$t_own1 $t_own2 $t_f1 $t_fn" | awk '{
	printf "imatch'"'"'s own ceiling: two first scans -j 1 at once over halves of the files (--files-from) against one over all: %.2fx; -j N reaches %.2fx.\n", $1 / $2, $3 / $4 }'
echo "$r_j1 $r_jn $r_base $nfiles $t_j1 $t_jn $r_f1 $t_f1 $t_fn $t_sha" | awk '{
	printf "Peak memory per document: %.2f kB (-j 1), %.2f kB (-j N) over the %.1f MB of a one-file scan with the same lexicon; first scan -j 1: %.2f kB.\n", ($1 - $3) / $4, ($2 - $3) / $4, $3 / 1024, ($7 - $3) / $4
	printf "Scaling -j N / -j 1: %.2fx (first scan), %.2fx (signing).\n", $8 / $9, $5 / $6
	printf "first_scan_vs_sha1sum_per_core: %.2f\n", $10 / $8 }'
echo "$t_shat $t_f1" | awk '{
	printf "first_scan_vs_find_sha1sum_per_core: %.2f\n", $1 / $2 }'
echo "$c_sha $c_f1 $c_j1" | awk '$1 > 0 {
	printf "CPU seconds (user + sys, best of the rounds): sha1sum %.2f, first scan -j 1 %.2f (%.2fx), signing -j 1 %.2f (%.2fx).\n", $1, $2, $1 / $2, $3, $1 / $3 }'
