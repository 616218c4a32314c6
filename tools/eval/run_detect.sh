#!/bin/sh
# The detection figures of README "Detection" (issue 9), on two corpora of
# Debian packages nobody here wrote, with brute-force truths:
#
#   tools/eval/run_detect.sh IMATCH [CACHE]     (about 5 minutes on 2 cores)
#
#  1. tools/eval/detect: recall and precision of `imatch dupes` against the
#     cosine >= 0.9 truth, and cluster pair precision, at several
#     --similarity thresholds and K.
#  2. tools/eval/perturb: 100 documents of about the mean length, 10 copies
#     each with 5% (2:9) and 10% (1:9) of the words edited.
# Corpora: tools/eval/fetch_corpus.sh (manuals: PostgreSQL, Perl, Python),
# tools/eval/fetch_licences.sh (common-licenses and the copyright files of the
# packages tools/eval/licences.list names), both used to choose the
# defaults, and tools/eval/fetch_heldout.sh (the kernel's Documentation/),
# held out: measured with the defaults chosen on the first two.
set -eu
imatch=${1:?usage: run_detect.sh IMATCH [CACHE]}
imatch=$(cd "$(dirname "$imatch")" && pwd)/$(basename "$imatch")
cache=${2:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
here=$(cd "$(dirname "$0")" && pwd)
"$here/fetch_corpus.sh" "$cache" >/dev/null
"$here/fetch_licences.sh" "$cache" >/dev/null
"$here/fetch_heldout.sh" "$cache" >/dev/null
for c in main licences heldout; do
	dir=$cache/corpus/$c
	echo "### $c"
	echo
	hdr=
	for s in 0.85 0.88 0.9 0.92; do
		python3 "$here/detect" --imatch "$imatch" --truth-cache "$cache/truth-$c.json" \
			--label "similarity $s" $hdr --similarity "$s" "$dir"
		hdr=--no-header
	done
	for k in 2 10 16; do
		python3 "$here/detect" --imatch "$imatch" --truth-cache "$cache/truth-$c.json" \
			--label "K $k" --no-header --k "$k" "$dir"
	done
	echo
	python3 "$here/perturb" --imatch "$imatch" --ks 4,10 --windows 0.2:0.8 \
		--strengths 2:9,1:9 --docs 100 --copies 10 --families none "$dir"
	echo
done
