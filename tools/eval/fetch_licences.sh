#!/bin/sh
# The second evaluation corpus: licence texts as Debian ships them, a
# collection full of real near-duplicates (the same licence with another
# copyright holder, year or preamble) and of short texts.
#
#   tools/eval/fetch_licences.sh [CACHE]   (default $IMATCH_EVAL_CACHE or /tmp/imatch-eval)
#
# CACHE/corpus/licences/ receives /usr/share/common-licenses/* (base-files)
# and the copyright files that tools/eval/licences.list names (a fixed list,
# so every machine measures the same 874 documents). A file is copied from
# this machine when its package is installed, else taken from the package's
# .deb (`apt-get download`, unpacked with dpkg-deb, nothing installed): on a
# bare machine that is about 575 MB once. Idempotent; safe as root, no stdin.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
list=$here/licences.list
cache=${1:-${IMATCH_EVAL_CACHE:-/tmp/imatch-eval}}
out=$cache/corpus/licences
stamp=$cache/corpus/licences.list

die() {
	echo "fetch_licences: $*" >&2
	exit 1
}

if [ -d "$out" ] && cmp -s "$stamp" "$list"; then
	echo "$out"
	exit 0
fi

entries() { grep -v '^#' "$list" | grep -v '^$'; }

installed() {
	dpkg-query -W -f '${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed
}

# The packages whose file this machine lacks, unpacked under $root.
root=$cache/licences.root
mkdir -p "$root" "$cache/licences.debs"
need=$(entries | while read -r name pkg path; do
	[ -f "/$path" ] && installed "$pkg" && continue
	[ -f "$root/$path" ] && continue
	echo "$pkg"
done | sort -u)
if [ -n "$need" ]; then
	n=$(echo "$need" | wc -l)
	echo "fetch_licences: $n packages to download" >&2
	cd "$cache/licences.debs"
	# One package at a time, so that a package gone from the archive is
	# named; as root apt warns that it cannot drop to _apt, harmless.
	for p in $need; do
		ls "${p}"_*.deb >/dev/null 2>&1 && continue
		apt-get download -q "$p" </dev/null >/dev/null 2>&1 ||
			{ apt-get update -q </dev/null >/dev/null 2>&1 &&
				apt-get download -q "$p" </dev/null >/dev/null 2>&1; } ||
			die "cannot download package $p (named in $list)"
	done
	for deb in ./*.deb; do
		[ -f "$deb" ] || continue
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$root" --wildcards './usr/share/doc/*' ||
			die "cannot unpack $deb"
		rm -f "$deb"
	done
	cd - >/dev/null
fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp/common-licenses"
cp -L /usr/share/common-licenses/* "$out.tmp/common-licenses/" ||
	die "no /usr/share/common-licenses (package base-files)"
entries | while read -r name pkg path; do
	src=$root/$path
	[ -f "$src" ] || src=/$path
	[ -f "$src" ] || die "$path is in neither $pkg's .deb nor this machine"
	mkdir -p "$out.tmp/$name"
	cp -L "$src" "$out.tmp/$name/copyright"
done
rm -rf "$out"
mv "$out.tmp" "$out"
cp "$list" "$stamp"
echo "$out"
