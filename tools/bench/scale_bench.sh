#!/bin/sh
# The batch stages on a local Dask cluster (tools/scale/imatch-cluster)
# beside `imatch scan` over the same tree, in the same run: wall time of the
# whole pipeline with 2 workers and with 1, of `imatch scan -j2` (the
# baseline), their ratios against issue 14's targets, whether the outputs
# are equal, and the driver's table per stage (bytes written per file at
# each stage boundary, peak memory of the largest process, CPU seconds).
#
#   tools/bench/scale_bench.sh IMATCH [TREE [SHARD_BYTES]]
#
# TREE defaults to the evaluation corpus of tools/eval/fetch_corpus.sh (real
# documentation: PostgreSQL, Perl and Python manuals, 2,684 files, 90 MB);
# tools/bench/gen_docs.py makes large generated ones (a million documents).
# SHARD_BYTES defaults to an eighth of the tree (four shards per worker of
# the 2-worker run; suffix K, M, G). Each command runs REPEAT times (default
# 1) over a warm page cache, interleaved, and the best time counts. The
# cluster's times include starting and stopping its LocalCluster: that is
# what a user waits for. EQUAL=scan compares scan.json only (dupes and
# dedupe --near each sign the whole tree once more).
set -eu

imatch=${1:?usage: scale_bench.sh IMATCH [TREE [SHARD_BYTES]]}
imatch=$(cd "$(dirname "$imatch")" && pwd)/$(basename "$imatch")
here=$(cd "$(dirname "$0")" && pwd)
tree=${2:-}
shard=${3:-auto}
repeat=${REPEAT:-1}
python=python3
python3 -c 'import distributed' 2>/dev/null || python=/usr/bin/python3
if [ -z "$tree" ]; then
	tree=$("$here/../eval/fetch_corpus.sh" "${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}")/main
fi
tree=$(cd "$tree" && pwd)
case $shard in
auto) shard=$(($(du -sb "$tree" | cut -f1) / 8 + 1)) ;;
*K) shard=$((${shard%K} * 1024)) ;;
*M) shard=$((${shard%M} * 1048576)) ;;
*G) shard=$((${shard%G} * 1073741824)) ;;
esac
work=$(mktemp -d /tmp/imatch-scale-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
best() { # best of the times in file $1
	sort -g "$1" | head -1
}

# Warm the page cache, so every command reads from memory.
find "$tree" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true

i=0
while [ $i -lt "$repeat" ]; do
	t0=$(now)
	/usr/bin/time -f %M -o "$work/scan.rss" \
		"$imatch" scan --json -j2 "$tree" >"$work/scan.json"
	t1=$(now)
	echo "$t1 - $t0" | bc >>"$work/t.scan"
	for n in 2 1; do
		rm -rf "$work/out$n"
		t0=$(now)
		"$python" "$here/../scale/imatch-cluster" --quiet --local $n \
			--imatch "$imatch" --shard-bytes "$shard" "$tree" \
			"$work/out$n" 2>"$work/log$n"
		t1=$(now)
		echo "$t1 - $t0" | bc >>"$work/t.cluster$n"
	done
	i=$((i + 1))
done

equal=yes
outputs=scan
if [ "${EQUAL:-all}" != scan ]; then
	outputs="scan dupes"
	"$imatch" dupes --json "$tree" >"$work/dupes.json"
	"$imatch" dedupe --near "$tree" >"$work/dedupe-near.jsonl" 2>/dev/null
	for n in 2 1; do
		cmp -s "$work/dedupe-near.jsonl" "$work/out$n/dedupe-near.jsonl" ||
			equal=no
	done
fi
for n in 2 1; do
	for f in $outputs; do
		if ! "$python" - "$work/$f.json" "$work/out$n/$f.json" <<'EOF'; then
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a.pop("root"); b.pop("root")
sys.exit(a != b)
EOF
			equal=no
		fi
	done
done

# The components stage holds the most (union-find over every document):
# its peak memory, run again under /usr/bin/time beside a process that only
# starts (the shared libraries every imatch maps).
o=$work/out2
/usr/bin/time -f %M -o "$work/comp.rss" "$imatch" components --lexicon \
	"$o/lexicon" -o "$work/clusters" "$o"/sign/*.rec "$o"/links/p*
/usr/bin/time -f %M -o "$work/base.rss" "$imatch" cat --head "$o/manifest" \
	>/dev/null
cmp -s "$work/clusters" "$o/clusters" || equal=no

files=$("$imatch" cat --head "$work/out2/manifest" |
	"$python" -c 'import json,sys; print(json.load(sys.stdin)["meta"]["files"])')
mb=$(du -sm "$tree" | cut -f1)
s=$(best "$work/t.scan")
c2=$(best "$work/t.cluster2")
c1=$(best "$work/t.cluster1")
echo "tree: $tree ($files files, $mb MB), shards of $shard bytes, $(nproc) CPUs"
echo "imatch scan -j2:              $s s  ($(echo "$files / $s" | bc) files/s, peak $(($(cat "$work/scan.rss") / 1024)) MB)"
echo "imatch-cluster --local 2:     $c2 s  ($(echo "$files / $c2" | bc) files/s)"
echo "imatch-cluster --local 1:     $c1 s"
echo "cluster(2) / scan -j2:        $(echo "scale=2; $c2 / $s" | bc)  (target <= 1.3)"
echo "cluster(1) / cluster(2):      $(echo "scale=2; $c1 / $c2" | bc)  (target >= 1.8)"
comp=$(($(cat "$work/comp.rss") * 1024))
base=$(($(cat "$work/base.rss") * 1024))
echo "components peak:              $((comp / 1048576)) MB = $((comp / files)) B/file ($(((comp - base) / files)) B/file above a bare imatch's $((base / 1048576)) MB; target <= 64)"
echo "outputs equal ($outputs${EQUAL:+}$([ "${EQUAL:-all}" = scan ] || echo ", dedupe --near")): $equal"
echo "per stage (2 workers):"
cat "$work/log2"
echo "per stage (1 worker):"
cat "$work/log1"
