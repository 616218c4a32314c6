#!/bin/sh
# Reproduce the papers' evaluation of imatch on real documents nobody here wrote
# and print markdown tables for the README.
#
#   tools/eval/run_eval.sh IMATCH [CACHE]
#
# IMATCH is a built `imatch` binary (this script builds nothing). CACHE holds
# the downloaded packages and corpora (default $IMATCH_EVAL_CACHE or
# /tmp/imatch-eval; see fetch_corpus.sh). Deterministic: fixed seeds throughout.
#
#  1. papers/000 §6.4, Tables 2-3: recall and precision of the near-duplicate
#     relation against the cosine >= 0.9 ground truth (tools/eval/cosine), for
#     K = 0, 2, 5, 10 and three nidf windows, then single-option sweeps of
#     keep, min_ratio and min_terms at K = 10.
#  2. papers/001 §4.3, Tables III-IV: the perturbation protocol
#     (tools/eval/perturb), for the same K and windows and three strengths,
#     then sweeps of keep and min_ratio.
# Takes about ten minutes on two cores.
set -eu

imatch=${1:?usage: run_eval.sh IMATCH [CACHE]}
imatch=$(cd "$(dirname "$imatch")" && pwd)/$(basename "$imatch")
[ -x "$imatch" ] || { echo "run_eval: $imatch is not executable" >&2; exit 1; }
cache=${2:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
here=$(cd "$(dirname "$0")" && pwd)
ks=${EVAL_KS:-0,2,5,10}
windows=${EVAL_WINDOWS:-0.2:0.8,0.1:1.0,0.3:0.7}

corpora=$("$here/fetch_corpus.sh" "$cache")
corpus=$corpora/main
truth=$cache/truth.json

echo "## Recall and precision against cosine >= 0.9 (papers/000 §6.4)"
echo
echo "Command: \`tools/eval/cosine --imatch IMATCH --ks $ks --windows $windows $corpus\`"
echo
python3 "$here/cosine" --imatch "$imatch" --ks "$ks" --windows "$windows" \
	--truth-cache "$truth" "$corpus"
echo
echo "Single-option sweeps at nidf [0.2, 0.8] (other options at their defaults):"
echo
hdr=
sweep() { # sweep OPTION VALUE...: one row pair (K = 0, 10) per value
	opt=$1
	shift
	for v in "$@"; do
		python3 "$here/cosine" --imatch "$imatch" --ks 0,10 --windows 0.2:0.8 \
			--truth-cache "$truth" --label "$opt=$v" --"$opt" "$v" $hdr "$corpus" | grep '^|'
		hdr=--no-header
	done
}
sweep keep 0.3 0.5 0.63 0.8
sweep min-ratio 0 0.25 0.5
sweep min-terms 3 5 10
echo
echo "## Perturbation protocol (papers/001 §4.3, Tables III-IV)"
echo
echo "Command: \`tools/eval/perturb --imatch IMATCH --ks $ks --windows $windows $corpus\`"
echo
python3 "$here/perturb" --imatch "$imatch" --ks "$ks" --windows "$windows" "$corpus"
echo
echo "Single-option sweeps at nidf [0.2, 0.8], 1% of the words edited:"
echo
hdr=
psweep() { # psweep OPTION VALUE...
	opt=$1
	shift
	for v in "$@"; do
		python3 "$here/perturb" --imatch "$imatch" --ks 0,10 --windows 0.2:0.8 \
			--strengths 10:9 --families none --label "$opt=$v" --"$opt" "$v" $hdr "$corpus"
		hdr=--no-header
	done
}
psweep keep 0.3 0.5 0.63 0.8
psweep min-ratio 0 0.25 0.5
