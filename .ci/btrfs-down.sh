#!/usr/bin/env bash
# Remove what .ci/btrfs-up.sh made: unmount $BERTH_TEST_BTRFS when it is our
# btrfs image (label berth-ci, backed by $BERTH_CI_STATE/btrfs.img), detach its
# loop device and delete the image. Anything else mounted there is left alone.
# make test runs it when the tests end, pass or fail.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MNT="${BERTH_TEST_BTRFS:-$BERTH_CI_STATE/btrfs}"
IMG="${BERTH_BTRFS_IMAGE:-$BERTH_CI_STATE/btrfs.img}"
LABEL=berth-ci

if mountpoint -q "$MNT"; then
	src=$(findmnt -n -o SOURCE --mountpoint "$MNT" | tail -n1)
	if [ "$(findmnt -n -o FSTYPE --mountpoint "$MNT" | tail -n1)" != btrfs ] ||
		[ "$(btrfs filesystem label "$MNT" 2>/dev/null || true)" != "$LABEL" ]; then
		say "$MNT is not our btrfs image; leaving it"
		exit 0
	fi
	# A test container still bind-mounting a volume would hold the mount busy:
	# the lazy unmount detaches it now and frees it when the last user goes.
	umount "$MNT" 2>/dev/null || umount -l "$MNT"
	case "$src" in /dev/loop*) losetup -d "$src" 2>/dev/null || true ;; esac
fi
if [ -f "$IMG" ]; then
	for dev in $(losetup -n -O NAME -j "$IMG" 2>/dev/null); do
		losetup -d "$dev" 2>/dev/null || true
	done
	rm -f "$IMG"
fi
say "btrfs test mount removed"
