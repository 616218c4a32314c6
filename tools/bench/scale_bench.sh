#!/bin/sh
# The batch stages on a local Dask cluster (tools/scale/imatch-cluster)
# beside `imatch scan` over the same tree, in the same run: wall time of the
# whole pipeline with 2 workers and with 1, of `imatch scan -j2` (the
# baseline), their ratios against issue 14's targets, whether the outputs
# are equal, and the driver's table per stage (wall and CPU seconds, bytes
# written per file at each stage boundary).
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
#
# Also measured in the same run: the CPU seconds of every process of each
# configuration (driver, scheduler, workers, imatch) against its wall time,
# i.e. the cores it used; the machine's own ceiling for the 1-to-2 worker
# ratio (two df tasks over one shard side by side against one after the
# other: 2.0 on two free cores, less when others use them); and the peak
# memory of one task of every stage, run again under /usr/bin/time beside a
# bare imatch.
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
best() { # best of the times in file $1 (lines: wall cpu)
	sort -g "$1" | head -1 | cut -d' ' -f1
}
cores() { # CPU seconds per wall second of the best run in file $1
	sort -g "$1" | head -1 | awk '{ printf "%.2f", $2 / $1 }'
}

# Warm the page cache, so every command reads from memory.
find "$tree" -type f -print0 | xargs -0 cat >/dev/null 2>&1 || true

peak() { # name, then the imatch arguments: its peak memory in rss.NAME
	name=$1
	shift
	/usr/bin/time -f %M -o "$work/rss.$name" "$imatch" "$@" \
		>"$work/out" 2>"$work/err"
}
# The ceiling of cluster(1) / cluster(2) on this machine at the time: one
# df task over the first shard, then two side by side (2.00 on two free
# cores). Measured before and after the runs.
cal() { "$imatch" df --files-from "$work/shards/000000" --root "$tree" \
	-P 1 -o "$work/cal$1"; }
ceiling() {
	t0=$(now)
	cal a
	t1=$(now)
	cal b &
	cal c
	wait
	t2=$(now)
	echo "scale=2; 2 * ($t1 - $t0) / ($t2 - $t1)" | bc
}
peak ls ls -o "$work/manifest" --shards "$work/shards" --shard-bytes \
	"$shard" "$tree"
ceiling0=$(ceiling)

i=0
while [ $i -lt "$repeat" ]; do
	t0=$(now)
	/usr/bin/time -f "%M %U %S" -o "$work/scan.time" \
		"$imatch" scan --json -j2 "$tree" >"$work/scan.json"
	t1=$(now)
	echo "$(echo "$t1 - $t0" | bc) $(cut -d' ' -f2- "$work/scan.time" |
		tr ' ' + | bc)" >>"$work/t.scan"
	for n in 2 1; do
		rm -rf "$work/out$n"
		t0=$(now)
		# The CPU of every process: the workers are the driver's
		# children, each imatch a worker's, and each reaps its own.
		/usr/bin/time -f "%U %S" -o "$work/cluster.time" \
			"$python" "$here/../scale/imatch-cluster" --quiet \
			--local $n --imatch "$imatch" --shard-bytes "$shard" \
			"$tree" "$work/out$n" 2>"$work/log$n"
		t1=$(now)
		echo "$(echo "$t1 - $t0" | bc) $(tr ' ' + <"$work/cluster.time" |
			bc)" >>"$work/t.cluster$n"
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

ceiling1=$(ceiling)
o=$work/out2

# Peak memory of one task of each stage (the first shard, the first
# partition; components and export have one), run again under
# /usr/bin/time beside a process that only starts (the shared libraries
# every imatch maps).
# The driver's shards: the list tasks' own directories, under $o/list.
nsh=$(find "$o/list" -path '*shards*' -type f | wc -l)
first=$(find "$o/list" -path '*shards*' -type f | sort | head -1)
np=$(find "$o/links" -name 'p*' | wc -l)
peak df df --files-from "$first" --root "$tree" -P "$np" \
	-o "$work/df"
peak sign sign --records --files-from "$first" --root "$tree" \
	--shard-id "0/$nsh" -P "$np" -o "$work/sign" --lexicon "$o/lexicon"
peak links links -o "$work/links" --lexicon "$o/lexicon" "$o"/sign/*.rec \
	"$o"/sign/*.k0000
peak components components --lexicon "$o/lexicon" -o "$work/clusters" \
	"$o"/sign/*.rec "$o"/links/p*
cmp -s "$work/clusters" "$o/clusters" || equal=no
peak export export --json --root "$tree" --lexicon "$o/lexicon" \
	"$o/manifest" "$o/clusters" "$o"/sign/*.rec
peak export-dupes export --dupes --json --root "$tree" --lexicon \
	"$o/lexicon" "$o"/sign/*.rec "$o"/links/p*
peak export-plan export --plan --near --root "$tree" --lexicon \
	"$o/lexicon" "$o"/sign/*.rec "$o"/links/p* "$o/clusters"
# export in parts (the run's --export-parts N): the first part of each
# output, and a join.
nx=$(find "$o/export" -name 'dupes.p*' | wc -l)
peak part-scan export --json --root "$tree" --lexicon "$o/lexicon" \
	--part "0/$nx" -o "$work/xs" "$o/manifest" "$o/clusters" "$o"/sign/*.rec
peak part-dupes export --dupes --json --root "$tree" --lexicon \
	"$o/lexicon" --part "0/$nx" -o "$work/xd" "$o"/sign/*.rec "$o"/links/p*
peak part-plan export --plan --near --root "$tree" --lexicon \
	"$o/lexicon" --part "0/$nx" -o "$work/xp" "$o"/sign/*.rec \
	"$o"/links/p* "$o/clusters"
peak join-plan export --plan --near --root "$tree" --lexicon "$o/lexicon" \
	"$o"/export/plan.p*
peak bare cat --head "$o/manifest"

files=$("$imatch" cat --head "$work/out2/manifest" |
	"$python" -c 'import json,sys; print(json.load(sys.stdin)["meta"]["files"])')
mb=$(du -sm "$tree" | cut -f1)
s=$(best "$work/t.scan")
c2=$(best "$work/t.cluster2")
c1=$(best "$work/t.cluster1")
echo "tree: $tree ($files files, $mb MB), shards of $shard bytes, $(nproc) CPUs"
echo "imatch scan -j2:              $s s  ($(echo "$files / $s" | bc) files/s, peak $(($(cut -d' ' -f1 "$work/scan.time") / 1024)) MB, $(cores "$work/t.scan") cores)"
echo "imatch-cluster --local 2:     $c2 s  ($(echo "$files / $c2" | bc) files/s, $(cores "$work/t.cluster2") cores)"
echo "imatch-cluster --local 1:     $c1 s  ($(cores "$work/t.cluster1") cores)"
echo "cluster(2) / scan -j2:        $(echo "scale=2; $c2 / $s" | bc)  (target <= 1.3)"
echo "cluster(1) / cluster(2):      $(echo "scale=2; $c1 / $c2" | bc)  (target >= 1.8; this machine's ceiling: $ceiling0 before, $ceiling1 after)"
echo "(cores: CPU seconds of all its processes per wall second)"
echo "peak memory of one task per stage:"
base=$(($(cat "$work/rss.bare") * 1024))
for name in ls df sign links components export export-dupes export-plan \
	part-scan part-dupes part-plan join-plan; do
	b=$(($(cat "$work/rss.$name") * 1024))
	printf '  %-13s %5d MB = %5d B/file (%d above a bare imatch)\n' \
		"$name" $((b / 1048576)) $((b / files)) $(((b - base) / files))
done
echo "  (bare imatch: $((base / 1048576)) MB; target for components <= 64 B/file;"
echo "   export: one process per output; part-*: part 0 of $nx, join-*: the merge)"
echo "outputs equal ($outputs${EQUAL:+}$([ "${EQUAL:-all}" = scan ] || echo ", dedupe --near")): $equal"
echo "per stage (2 workers):"
cat "$work/log2"
echo "per stage (1 worker):"
cat "$work/log1"
