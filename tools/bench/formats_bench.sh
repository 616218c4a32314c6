#!/usr/bin/env bash
# Extraction throughput on office documents (issue 8), against the usual
# command-line extractors over the same files in the same run. Prints
# figures; asserts nothing.
#
#   tools/bench/formats_bench.sh [IMATCH] [WORK] [BEFORE]
#
# The share: every text of tests/data/demo (licences and npm licence files)
# as docx, odt, epub, html (pandoc) and pdf (LibreOffice, from the docx),
# kept in WORK (default /tmp/imatchfs-formats-bench) and reused. Needs pandoc,
# soffice and pdftotext (poppler-utils).
#
# Figures, one process per file for the others as they are used in scripts,
# one `imatch terms` over all files of a format for ours (its helper is
# started once and reused, as in a scan); every run is single-threaded:
#   ours_pdf_s / pdftotext_s        the PDFs
#   ours_office_s / pandoc_plain_s  the docx, odt, epub and html files
# and the ratio (theirs / ours: above 1 means we are faster). With BEFORE,
# also text-only figures against that older imatch (see the end).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
imatch=${1:-$here/build/tools/imatch}
work=${2:-/tmp/imatchfs-formats-bench}
for t in pandoc soffice pdftotext; do
	command -v $t >/dev/null || { echo "formats_bench: $t is missing" >&2; exit 1; }
done

mkdir -p "$work/share" "$work/text"
if [ ! -e "$work/share/.done" ]; then
	i=0
	find "$here/tests/data/demo" -type f ! -name README | sort | while read -r f; do
		i=$((i + 1))
		cp "$f" "$work/text/t$i.txt"
	done
	for t in "$work"/text/*.txt; do
		b=$(basename "$t" .txt)
		for fmt in docx odt epub; do
			pandoc -f markdown -t $fmt --metadata title="$b" -o "$work/share/$b.$fmt" "$t"
		done
		pandoc -f markdown -s -t html --metadata title="$b" -o "$work/share/$b.html" "$t"
	done
	HOME=$work soffice --headless --convert-to pdf --outdir "$work/share" \
		"$work"/share/*.docx >/dev/null 2>&1
	touch "$work/share/.done"
fi
cd "$work/share"
n_pdf=$(ls *.pdf | wc -l)
n_off=$(ls *.docx *.odt *.epub *.html | wc -l)
mb() { du -cb "$@" | tail -1 | awk '{printf "%.1f", $1 / 1e6}'; }
echo "files: $n_pdf pdf ($(mb *.pdf) MB), $n_off docx/odt/epub/html ($(mb *.docx *.odt *.epub *.html) MB)"

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l | awk '{printf "%.3f", $1}'; }
best() { # best of 3 wall times of "$@"
	local b=
	for _ in 1 2 3; do
		local t0 e
		t0=$(now)
		"$@" >/dev/null 2>&1
		e=$(elapsed "$t0")
		if [ -z "$b" ] || [ "$(echo "$e < $b" | bc)" = 1 ]; then b=$e; fi
	done
	echo "$b"
}
each() { local cmd=$1; shift; for f in "$@"; do $cmd "$f"; done; }
pdftotext_one() { pdftotext "$1" -; }
pandoc_one() { pandoc -t plain "$1"; }

ours_pdf=$(best "$imatch" terms *.pdf)
theirs_pdf=$(best each pdftotext_one *.pdf)
ours_off=$(best "$imatch" terms *.docx *.odt *.epub *.html)
theirs_off=$(best each pandoc_one *.docx *.odt *.epub *.html)
ratio() { echo "$1 / $2" | bc -l | awk '{printf "%.1f", $1}'; }
echo "ours_pdf_s: $ours_pdf"
echo "pdftotext_s: $theirs_pdf"
echo "pdf_ratio: $(ratio "$theirs_pdf" "$ours_pdf")"
echo "ours_office_s: $ours_off"
echo "pandoc_plain_s: $theirs_off"
echo "office_ratio: $(ratio "$theirs_off" "$ours_off")"
echo "ours_files_per_s: $(echo "($n_pdf + $n_off) / ($ours_pdf + $ours_off)" | bc -l | awk '{printf "%.0f", $1}')"

# Text-only shares must not get slower (issue 8 item 6): text stays in
# process. With BEFORE (3rd argument or $IMATCH_BEFORE: an imatch built
# from 5e113bd, the commit before the formats landed, e.g.
#   git worktree add /tmp/before 5e113bd && meson setup /tmp/before/build \
#     /tmp/before -Dtests=disabled && ninja -C /tmp/before/build tools/imatch
# ), both run over a text-only tree: tests/data/demo and 40 lightly perturbed
# replicas (tools/bench/replicate.py: real text, 1,845 files, 23 MB), rounds
# interleaved, best of 5:
#   textonly_terms_*  imatch terms over every file, one process (format
#                     sniffing, extraction, tokenizing: the path that changed)
#   textonly_lexicon_*  imatch lexicon build (the same, threaded, plus counting)
#   textonly_scan_*   imatch scan end to end (also holds what changed for
#                     detection since: sketches, verification)
# and each ratio before / now (1 or more: not slower).
before=${3:-${IMATCH_BEFORE:-}}
if [ -n "$before" ]; then
	tree=$work/textonly
	if [ ! -e "$tree/.done" ]; then
		rm -rf "$tree"
		python3 "$here/tools/bench/replicate.py" "$here/tests/data/demo" "$tree" 40 >/dev/null
		touch "$tree/.done"
	fi
	mapfile -t files < <(find "$tree" -type f ! -name '.*' | sort)
	echo "textonly_files: ${#files[@]} ($(du -cb "${files[@]}" | tail -1 | awk '{printf "%.1f", $1 / 1e6}') MB)"
	once() { local t0; t0=$(now); "$@" >/dev/null 2>&1 || { echo "formats_bench: $* failed" >&2; exit 1; }; elapsed "$t0"; }
	lower() { if [ -z "$1" ] || [ "$(echo "$2 < $1" | bc)" = 1 ]; then echo "$2"; else echo "$1"; fi; }
	declare -A bt
	for _ in 1 2 3 4 5; do
		for who in now before; do
			bin=$imatch
			[ $who = before ] && bin=$before
			bt[terms_$who]=$(lower "${bt[terms_$who]:-}" "$(once "$bin" terms "${files[@]}")")
			bt[lexicon_$who]=$(lower "${bt[lexicon_$who]:-}" "$(once "$bin" lexicon build -o "$work/lex.$who" "$tree")")
			bt[scan_$who]=$(lower "${bt[scan_$who]:-}" "$(once "$bin" scan "$tree")")
		done
	done
	for what in terms lexicon scan; do
		echo "textonly_${what}_now_s: ${bt[${what}_now]}"
		echo "textonly_${what}_before_s: ${bt[${what}_before]}"
		echo "textonly_${what}_ratio: $(echo "${bt[${what}_before]} / ${bt[${what}_now]}" | bc -l | awk '{printf "%.2f", $1}')"
	done
fi
