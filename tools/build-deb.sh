#!/usr/bin/env bash
# Build the Debian package from this checkout: copies the tree with
# packaging/debian/ as debian/ into a scratch directory, installs the build
# dependencies and runs dpkg-buildpackage. The .deb lands in OUTDIR
# (default: ./build-deb/).
#
#   tools/build-deb.sh [OUTDIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/build-deb}" && cd "${1:-$top/build-deb}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y -qq --no-install-recommends \
	build-essential debhelper dpkg-dev meson ninja-build pkg-config \
	libfuse3-dev libssl-dev libxxhash-dev libutf8proc-dev check \
	python3-docutils >/dev/null

# The files git knows, as they are in the working tree (no build dirs).
mkdir -p "$work/src"
(cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$work/src"
cp -a "$work/src/packaging/debian" "$work/src/debian"
(cd "$work/src" && dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1) || {
	tail -40 "$work/build.log" >&2
	exit 1
}
cp "$work"/*.deb "$out/"
ls "$out"/*.deb
