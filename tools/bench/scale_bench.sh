#!/bin/sh
# The batch stages on a local Dask cluster (tools/scale/imatch-cluster)
# beside `imatch scan` over the same tree, in the same run: wall time of the
# whole pipeline with 2 workers and with 1, of `imatch scan -j2` (the
# baseline), their ratios, and whether the outputs are equal.
#
#   tools/bench/scale_bench.sh IMATCH [TREE [SHARD_BYTES]]
#
# TREE defaults to the evaluation corpus of tools/eval/fetch_corpus.sh (real
# documentation: PostgreSQL, Perl and Python manuals, 2,684 files, 90 MB).
# SHARD_BYTES (default 8M) cuts it into about a dozen shards. Each command
# runs REPEAT times (default 1) over a warm page cache, interleaved, and the
# best time counts: load from elsewhere hits all alike. The cluster's times
# include starting and stopping its LocalCluster (a few seconds): that is
# what a user waits for.
set -eu

imatch=${1:?usage: scale_bench.sh IMATCH [TREE [SHARD_BYTES]]}
imatch=$(cd "$(dirname "$imatch")" && pwd)/$(basename "$imatch")
here=$(cd "$(dirname "$0")" && pwd)
tree=${2:-}
shard=${3:-8M}
repeat=${REPEAT:-1}
python=python3
python3 -c 'import distributed' 2>/dev/null || python=/usr/bin/python3
if [ -z "$tree" ]; then
	tree=$("$here/../eval/fetch_corpus.sh" "${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}")/main
fi
case $shard in
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
cat $(find "$tree" -type f | head -100000) >/dev/null 2>&1 || true

i=0
while [ $i -lt "$repeat" ]; do
	t0=$(now)
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

"$imatch" dupes --json "$tree" >"$work/dupes.json"
equal=yes
for n in 2 1; do
	for f in scan dupes; do
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

files=$("$imatch" cat --head "$work/out2/manifest" |
	"$python" -c 'import json,sys; print(json.load(sys.stdin)["meta"]["files"])')
mb=$(du -sm "$tree" | cut -f1)
s=$(best "$work/t.scan")
c2=$(best "$work/t.cluster2")
c1=$(best "$work/t.cluster1")
echo "tree: $tree ($files files, $mb MB), shards of $shard bytes, $(nproc) CPUs"
echo "imatch scan -j2:              $s s  ($(echo "$files / $s" | bc) files/s)"
echo "imatch-cluster --local 2:     $c2 s  ($(echo "$files / $c2" | bc) files/s)"
echo "imatch-cluster --local 1:     $c1 s"
echo "cluster(2) / scan -j2:        $(echo "scale=2; $c2 / $s" | bc)"
echo "cluster(1) / cluster(2):      $(echo "scale=2; $c1 / $c2" | bc)"
echo "outputs equal to scan/dupes:  $equal"
echo "per stage (2 workers):"
cat "$work/log2"
