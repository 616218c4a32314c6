#!/usr/bin/env bash
# Install what building and testing imatchfs needs, from Debian's packages.
# Runs apt-get as root, or through sudo; does nothing when all is present.
set -euo pipefail

pkgs=(build-essential meson ninja-build pkg-config libfuse3-dev fuse3
      libssl-dev libxxhash-dev libutf8proc-dev check python3 valgrind
      python3-distributed
      libpoppler-glib-dev libarchive-dev libexpat1-dev libseccomp-dev
      clang-format clang libclang-rt-14-dev rsync python3-docutils
      btrfs-progs gdb strace)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
