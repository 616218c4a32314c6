#!/usr/bin/env bash
# Seeds for the fuzz targets of fuzz_formats.c, made by imatch itself:
#   tests/fuzz/make_seeds.sh IMATCH OUT
# writes OUT/<target>/ for lexicon, state, planline, keep, stage, records,
# shard, toolrecs, manifest, df and export. Made afresh at every run rather than kept in the repository: the
# formats carry a version, and seeds of an older one would stop at the
# version check. A small tree (a few cut-down licences, a near and an exact
# copy, a binary file) keeps each file small, so that the fuzzer mutates
# structure rather than text.
set -euo pipefail
imatch=$(realpath "$1")
out=$(realpath -m "$2")
src=$(realpath "$(dirname "$0")/../data/demo")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree/sub" \
	"$out"/{lexicon,state,planline,keep,stage,records,shard} \
	"$out"/{toolrecs,manifest,df,export}
head -c 900 "$src/npm/debug/LICENSE" >"$tree/mit"
cp "$tree/mit" "$tree/sub/mit-copy"
# A name that is not UTF-8 and holds a quote: escapes in the plan lines.
cp "$tree/mit" "$tree/sub/$(printf 'x\377"y')"
sed 's/the Software/this software/' "$tree/mit" >"$tree/sub/mit-near"
head -c 1200 "$src/licenses/BSD" >"$tree/bsd"
head -c 1000 "$src/licenses/Apache-2.0" >"$tree/sub/apache"
head -c 800 "$src/licenses/GPL-2" >"$tree/gpl"
printf 'binary\0data\0' >"$tree/blob"

cd "$work"
"$imatch" lexicon build -o lexicon "$tree" 2>/dev/null
"$imatch" ls -o manifest --shards shards "$tree" 2>/dev/null
"$imatch" df --files-from shards/000000 --root "$tree" -P 2 -o df 2>/dev/null
"$imatch" sign --records --files-from shards/000000 --root "$tree" \
	--shard-id 0/1 -P 2 --lexicon lexicon -o sign 2>/dev/null
"$imatch" links --lexicon lexicon -o links0 sign.rec sign.k0000 2>/dev/null
"$imatch" links --lexicon lexicon -o links1 sign.rec sign.k0001 2>/dev/null
"$imatch" components --lexicon lexicon -o clusters sign.rec links0 links1 \
	2>/dev/null
"$imatch" export --lexicon lexicon --part 0/1 -o export manifest clusters \
	sign.rec 2>/dev/null
"$imatch" state import --lexicon lexicon -o state sign.rec 2>/dev/null
# The tools' own kinds in every shape a run makes: a manifest without
# shards and one merged from parts, a merged df partition, and parts of
# each output of export (scan, dupes, plan) of one and of two parts.
"$imatch" ls -o manifest-whole "$tree" 2>/dev/null
"$imatch" ls merge -o manifest-merged manifest manifest-whole 2>/dev/null
"$imatch" df merge -o df-merged df.p0000 2>/dev/null
"$imatch" export --lexicon lexicon --part 1/2 -o export-scan1 manifest \
	clusters sign.rec 2>/dev/null
for i in 0 1; do
	"$imatch" export --dupes --json --root "$tree" --lexicon lexicon \
		--part $i/2 -o export-dupes$i sign.rec links0 links1 2>/dev/null
	"$imatch" export --plan --near --root "$tree" --lexicon lexicon \
		--part $i/2 -o export-plan$i sign.rec links0 links1 clusters \
		2>/dev/null
done

cp lexicon "$out/lexicon/"
cp state/sigcache "$out/state/"
cp shards/* "$out/shard/"
for f in manifest df.p0000 df.p0001 sign.rec sign.k0000 sign.k0001 links0 \
	links1 clusters export; do
	cp "$f" "$out/stage/$f"
done
cp manifest manifest-whole manifest-merged "$out/manifest/"
cp df.p0000 df.p0001 df-merged "$out/df/"
cp export export-scan1 export-dupes0 export-dupes1 export-plan0 \
	export-plan1 "$out/export/"
# Every action and kind imatch dedupe writes, a line a seed.
for args in "" "--near --action trash=$work/trash" "--action hardlink" \
	"--action symlink" "--action reflink"; do
	# shellcheck disable=SC2086
	"$imatch" dedupe $args "$tree" 2>/dev/null | while IFS= read -r line; do
		printf '%s\n' "$line" >"$out/planline/$(printf '%s' "$line" |
			md5sum | cut -c1-16)"
	done
done
for rules in protect,oldest,shortest,name newest longest,name \
	shortest,newest,protect; do
	printf '%s' "$rules" >"$out/keep/$rules"
done
# The payloads of stage files, each behind the byte that picks the target's
# decoder: split_records DIR KIND:DECODER,... FILE...
split_records() {
	python3 - "$@" <<'EOF'
import hashlib, os, sys
out = sys.argv[1]
# enum im_stage_kind -> decoder
which = dict(map(int, p.split(":")) for p in sys.argv[2].split(","))
for path in sys.argv[3:]:
    b = open(path, "rb").read()
    kind = int.from_bytes(b[12:16], "little")
    off, end = 32, len(b) - (8 + 8 * 16 + 8)
    while off + 4 <= end:
        n = int.from_bytes(b[off:off + 4], "little")
        rec = bytes([which[kind]]) + b[off + 4:off + 4 + n]
        off += 4 + n
        name = hashlib.sha1(rec).hexdigest()[:16]
        with open(os.path.join(out, name), "wb") as f:
            f.write(rec)
EOF
}
# fuzz_records: 0 documents, 1 keys, 2 links, 3 clusters.
split_records "$out/records" 3:0,4:1,5:2,6:3 sign.rec sign.k0000 links0 \
	clusters
# fuzz_toolrecs: 0 manifest, 1 df, 2 export parts.
split_records "$out/toolrecs" 1:0,2:1,7:2 manifest df.p0000 export \
	export-dupes0 export-plan0
