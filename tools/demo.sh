#!/usr/bin/env bash
# The main job: install dependencies, build, and mount imatchfs over SOURCE
# (default: the bundled demo tree of real near-duplicate licence texts) at
# MOUNTPOINT (default: /tmp/imatchfs-demo). Waits for the first scan, shows
# what the view holds and what to type next. The mount stays up.
#
#   tools/demo.sh [SOURCE [MOUNTPOINT]]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source_dir=$(realpath -e "${1:-$top/tests/data/demo}")
# Absolute before the cd below, as SOURCE is: a relative MOUNTPOINT is where
# the user stands, not in the checkout.
mnt=$(realpath -m -- "${2:-/tmp/imatchfs-demo}")

"$top/tools/deps.sh"
cd "$top"
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

# An earlier demo's mount is replaced; anything else mounted there is left
# alone (as root, fusermount3 -u would unmount any FUSE filesystem). Asked of
# the mount table, not of the mountpoint, which a dead daemon's mount answers
# with ENOTCONN.
if fstype=$(findmnt -n -o FSTYPE --mountpoint "$mnt"); then
	if [ "$fstype" != fuse.imatchfs ]; then
		echo "demo.sh: $mnt is already a mount point (${fstype:-unknown})," \
			"not imatchfs: give another MOUNTPOINT" >&2
		exit 1
	fi
	fusermount3 -u "$mnt"
fi
mkdir -p "$mnt"
# The state (lexicon, signature cache) goes to the daemon's default place,
# one directory per SOURCE, so each tree gets its own lexicon.
./build/fs/imatchfs "$source_dir" "$mnt"

# The mount is browsable at once; wait (generously) for the first scan.
for _ in $(seq 600); do
	grep -q '^phase: live' "$mnt/status" 2>/dev/null && break
	sleep 0.1
done

echo "== imatchfs $source_dir mounted at $mnt"
echo
echo "\$ cat $mnt/status"
cat "$mnt/status"
echo
echo "\$ ls $mnt/clusters/ | head"
ls "$mnt/clusters/" | head
first=$(ls "$mnt/clusters/" | head -n 1)
if [ -n "$first" ]; then
	echo
	echo "\$ ls -l $mnt/clusters/$first/"
	ls -l "$mnt/clusters/$first/"
fi
cat <<TXT

imatch and imatchfs are built in $top/build, not installed. To run them by
name, put them on your PATH:
  export PATH="$top/build/tools:$top/build/fs:\$PATH"
or install them (programs, man pages, the systemd user unit):
  sudo meson install -C "$top/build"

Next:
  ls $mnt/clusters/                      # one directory per group of near-duplicates
  ls $mnt/by-doc/                        # the source tree; each file is a directory
  ls $mnt/by-doc/<path>/dupes/           # the near-duplicates of one document
  cat $mnt/by-doc/<path>/signatures      # its K+1 signatures
  imatch scan $source_dir                # the same clusters, without mounting
  fusermount3 -u $mnt                    # unmount
TXT
