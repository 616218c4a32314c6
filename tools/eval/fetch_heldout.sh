#!/bin/sh
# The held-out evaluation corpus: a third collection the detection defaults
# were never tuned on (README "Detection"), the Linux kernel's
# Documentation/ tree as Debian ships it (package linux-doc-6.1, the
# reStructuredText sources, gzipped by dh_compress).
#
#   tools/eval/fetch_heldout.sh [CACHE]   (default $IMATCH_EVAL_CACHE or /tmp/imatch-eval)
#
# CACHE/corpus/heldout/ receives, decompressed and under their own paths:
# every *.rst and *.txt file of Documentation/ and every file of
# Documentation/ABI/ (sysfs attribute descriptions, no extension); left out
# are translations/ (the same documents in other languages), devicetree/
# (5,100 YAML bindings, a corpus of their own) and the images, scripts and
# build files. About 3,460 documents, 30 MB. Real near-duplicates: the
# per-feature arch-support tables (features/), the ABI descriptions of
# sibling drivers, the hwmon pages of related chips, stubs that point to a
# moved file.
#
# The package version is frozen (below) so that every machine measures the
# same corpus; if the archive has dropped it, take the .deb from
# snapshot.debian.org into CACHE/heldout.debs/. About 37 MB downloaded once
# (`apt-get download`, unpacked with dpkg-deb, nothing installed).
# Idempotent; safe as root, no stdin.
set -eu
pkg=linux-doc-6.1
version=6.1.192-2
cache=${1:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
out=$cache/corpus/heldout
stamp=$cache/corpus/heldout.list
debs=$cache/heldout.debs
doc=usr/share/doc/$pkg/Documentation

die() {
	echo "fetch_heldout: $*" >&2
	exit 1
}

echo "fetch_heldout: $pkg $version" >&2
if [ -d "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pkg $version" ]; then
	echo "$out"
	exit 0
fi

mkdir -p "$debs"
# apt-get download names the file with the epoch's ':' as '%3a'.
deb=$debs/${pkg}_$(echo "$version" | sed 's/:/%3a/')_all.deb
if [ ! -f "$deb" ]; then
	# As root apt warns that it cannot drop to _apt, harmless.
	(cd "$debs" && { apt-get download -q "$pkg=$version" </dev/null >/dev/null 2>&1 ||
		{ apt-get update -q </dev/null >/dev/null 2>&1 &&
			apt-get download -q "$pkg=$version" </dev/null >/dev/null 2>&1; }; }) ||
		die "cannot download $pkg=$version (put its .deb in $debs)"
fi
[ -f "$deb" ] || die "$deb missing after apt-get download"

root=$cache/heldout.root
rm -rf "$root" "$out.tmp"
mkdir -p "$root" "$out.tmp"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" "./$doc" ||
	die "cannot unpack $deb"
(cd "$root/$doc" && find . \( -path ./translations -o -path ./devicetree \) -prune -o \
	-type f \( -name '*.rst.gz' -o -name '*.txt.gz' -o -path './ABI/*' \) -print) |
	sort | while read -r f; do
		case $f in *.gz) name=${f%.gz} ;; *) name=$f ;; esac
		mkdir -p "$out.tmp/$(dirname "$name")"
		case $f in
		*.gz) gzip -dc "$root/$doc/$f" >"$out.tmp/$name" ;;
		*) cp "$root/$doc/$f" "$out.tmp/$name" ;;
		esac || die "cannot copy $f"
	done
n=$(find "$out.tmp" -type f | wc -l)
[ "$n" -gt 3000 ] || die "only $n documents from $deb"
rm -rf "$out" "$root"
mv "$out.tmp" "$out"
echo "$pkg $version" >"$stamp"
echo "$out"
