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
#     K = 0, 2, 5, 10 and three nidf windows, then sweeps of keep, min_ratio
#     and min_terms (alone and combined) at K = 10.
#  2. papers/001 §4.3, Tables III-IV: the perturbation protocol
#     (tools/eval/perturb), for the same K and windows and three strengths,
#     then the same sweeps.
# Takes about fifteen minutes on two cores.
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
# Settings swept at K = 10, nidf [0.2, 0.8]: one option at a time, then the
# combinations that the single sweeps point to (a small keep needs a small
# min_ratio, since S_k holds about keep * |L & U| terms; a small S_k wants a
# larger min_terms to stay precise).
settings="keep=0.8 keep=0.63 keep=0.5 keep=0.3 min-ratio=0 min-ratio=0.5 min-terms=3 min-terms=10
keep=0.5,min-ratio=0.15 keep=0.3,min-ratio=0 keep=0.3,min-ratio=0,min-terms=10
keep=0.2,min-ratio=0 keep=0.2,min-ratio=0,min-terms=10"
args_of() { # keep=0.3,min-ratio=0 -> --keep 0.3 --min-ratio 0
	echo "$1" | tr ',' '\n' | sed 's/^/--/; s/=/ /'
}
echo "Sweeps at nidf [0.2, 0.8] (options not named are at their defaults):"
echo
hdr=
for st in $settings; do
	# shellcheck disable=SC2046
	python3 "$here/cosine" --imatch "$imatch" --ks 0,10 --windows 0.2:0.8 \
		--truth-cache "$truth" --label "$st" $(args_of "$st") $hdr "$corpus" | grep '^|' ||
		echo "| $st | failed: see stderr |"
	hdr=--no-header
done
echo
echo "## Perturbation protocol (papers/001 §4.3, Tables III-IV)"
echo
echo "Command: \`tools/eval/perturb --imatch IMATCH --ks $ks --windows $windows $corpus\`"
echo
python3 "$here/perturb" --imatch "$imatch" --ks "$ks" --windows "$windows" "$corpus"
echo
echo "Sweeps at nidf [0.2, 0.8], K = 10, 1% and 2% of the words edited:"
echo
hdr=
for st in $settings; do
	# shellcheck disable=SC2046
	python3 "$here/perturb" --imatch "$imatch" --ks 10 --windows 0.2:0.8 --strengths 10:9,5:9 \
		--families none --label "$st" $(args_of "$st") $hdr "$corpus" ||
		echo "| $st | failed: see stderr |"
	hdr=--no-header
done
