#!/bin/sh
# The second evaluation corpus: licence texts as Debian ships them, a
# collection full of real near-duplicates (the same licence with another
# copyright holder, year or preamble) and of short texts.
#
#   tools/eval/fetch_licences.sh [CACHE]   (default $IMATCH_EVAL_CACHE or /tmp/imatch-eval)
#
# CACHE/corpus/licences/ receives /usr/share/common-licenses/* (base-files)
# and the /usr/share/doc/PACKAGE/copyright file of every installed package,
# as PACKAGE/copyright, symlinks resolved. On the Debian 12 build machine
# of this project that is about 970 files; another machine with other
# packages gives another corpus, so the README states the count measured.
set -eu
cache=${1:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
out=$cache/corpus/licences
rm -rf "$out.tmp"
mkdir -p "$out.tmp/common-licenses"
cp -L /usr/share/common-licenses/* "$out.tmp/common-licenses/" 2>/dev/null || true
for f in /usr/share/doc/*/copyright; do
	[ -f "$f" ] || continue
	p=$(basename "$(dirname "$f")")
	mkdir -p "$out.tmp/$p"
	cp -L "$f" "$out.tmp/$p/copyright"
done
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
