#!/usr/bin/env bash
# Make a btrfs filesystem with quotas (qgroups) enabled answer at
# $BERTH_TEST_BTRFS (default $BERTH_CI_STATE/btrfs), for the volume tests:
# this machine's kernel has XFS without quota support, but btrfs qgroups work
# on a loop-mounted image.
#
#   - installs btrfs-progs when `btrfs` or `mkfs.btrfs` is missing;
#   - reuses a healthy mount: btrfs, backed by our image, quotas enabled;
#   - handles what an earlier run may have left: a mount whose backing file is
#     gone or whose loop device is detached (lazily unmounted), loop devices of
#     our image that nothing mounts (detached), an image that is not a btrfs
#     (an interrupted mkfs: made again — it only ever holds test data);
#   - otherwise creates a sparse $BERTH_BTRFS_SIZE image under $BERTH_CI_STATE,
#     mkfs.btrfs, attaches it to a loop device, mounts it, makes the mount
#     private (a container's bind mount of a volume must never propagate back
#     to the host or between containers) and runs `btrfs quota enable`;
#   - checks that dockerd sees the mount: a dockerd in a mount namespace of
#     its own (a systemd unit with PrivateMounts/MountFlags) would bind-mount
#     the empty directory underneath instead of the volume.
#
# A mount point holding anything else (another filesystem, or a btrfs that is
# not our image) is never unmounted: the script fails naming it.
set -euo pipefail
# shellcheck source=SCRIPTDIR/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MNT="${BERTH_TEST_BTRFS:-$BERTH_CI_STATE/btrfs}"
IMG="${BERTH_BTRFS_IMAGE:-$BERTH_CI_STATE/btrfs.img}"
SIZE="${BERTH_BTRFS_SIZE:-2G}"
LABEL=berth-ci

ensure_tools() {
	command -v btrfs >/dev/null 2>&1 && command -v mkfs.btrfs >/dev/null 2>&1 && return 0
	apt_install btrfs-progs
}

# mount_source prints the source device of the mount at $MNT ("" when $MNT is
# not a mount point).
mount_source() { findmnt -n -o SOURCE --mountpoint "$MNT" 2>/dev/null | tail -n1 || true; }
mount_fstype() { findmnt -n -o FSTYPE --mountpoint "$MNT" 2>/dev/null | tail -n1 || true; }

# loop_file prints the backing file of loop device $1 ("" when detached).
loop_file() { losetup -n -O BACK-FILE "$1" 2>/dev/null | sed 's/[[:space:]]*$//' || true; }

quotas_enabled() { btrfs qgroup show "$MNT" >/dev/null 2>&1; }

# healthy: $MNT is a btrfs mount of our image (through a loop device) whose
# root we can write.
healthy() {
	local src back
	[ "$(mount_fstype)" = btrfs ] || return 1
	src=$(mount_source)
	case "$src" in /dev/loop*) ;; *) return 1 ;; esac
	back=$(loop_file "$src")
	[ "$back" = "$(readlink -f "$IMG")" ] || return 1
	[ -w "$MNT" ]
}

# clear_stale handles a mount at $MNT that is not healthy: one of our image
# whose backing file is gone (" (deleted)") or whose loop device is detached is
# unmounted lazily; anything else is not ours to touch.
clear_stale() {
	local src back fstype
	mountpoint -q "$MNT" || return 0
	fstype=$(mount_fstype)
	src=$(mount_source)
	back=""
	case "$src" in /dev/loop*) back=$(loop_file "$src") ;; esac
	if [ "$fstype" = btrfs ] && { [ -z "$back" ] || [ "$back" = "$(readlink -f "$IMG") (deleted)" ] ||
		[ "${back% (deleted)}" != "$back" ]; } && [ "$(btrfs filesystem label "$MNT" 2>/dev/null || true)" = "$LABEL" ]; then
		say "unmounting the stale $MNT (btrfs '$LABEL' on ${src:-?}, backing file '${back:-detached}')"
		umount -l "$MNT"
		# Its loop device is ours too; while the lazy unmount still holds it,
		# detaching only marks it to clear itself once free.
		case "$src" in /dev/loop*) losetup -d "$src" 2>/dev/null || true ;; esac
		return 0
	fi
	die "$MNT is a mount point of $fstype from $src (backing file '${back:-none}'), not our btrfs image $IMG; not touching it"
}

# detach_idle_loops detaches loop devices of our image that no mount uses.
detach_idle_loops() {
	local dev
	while read -r dev; do
		dev=${dev%%:*}
		[ -n "$dev" ] || continue
		if findmnt -n --source "$dev" >/dev/null 2>&1; then
			continue
		fi
		say "detaching idle loop device $dev of $IMG"
		losetup -d "$dev" || warn "could not detach $dev"
	done < <(losetup -j "$IMG" 2>/dev/null || true)
}

make_image() {
	mkdir -p "$(dirname "$IMG")"
	if [ -f "$IMG" ] && [ "$(blkid -p -s TYPE -o value "$IMG" 2>/dev/null || true)" = btrfs ]; then
		return 0
	fi
	say "creating a sparse $SIZE btrfs image at $IMG"
	rm -f "$IMG"
	truncate -s "$SIZE" "$IMG"
	mkfs.btrfs -q -L "$LABEL" "$IMG" >/dev/null
}

mount_image() {
	local dev
	mkdir -p "$MNT"
	dev=$(losetup --find --show "$IMG") || die "losetup --find --show $IMG failed (no free loop device?)"
	say "mounting $IMG ($dev) at $MNT"
	if ! mount -t btrfs "$dev" "$MNT"; then
		losetup -d "$dev" || true
		die "mount -t btrfs $dev $MNT failed"
	fi
}

ensure_quotas() {
	quotas_enabled && return 0
	say "btrfs quota enable $MNT"
	btrfs quota enable "$MNT"
	# Enabling starts a rescan of what is already there; wait for it so the
	# first accounting a test reads is complete.
	btrfs quota rescan -w "$MNT" >/dev/null 2>&1 || true
	quotas_enabled || die "btrfs qgroups still not available on $MNT after quota enable"
}

# check_dockerd_sees_mount: dockerd resolves bind-mount sources in its own mount
# namespace; when that is not ours, our mount must be visible there.
check_dockerd_sees_mount() {
	local pid
	pid=$(cat /var/run/docker.pid 2>/dev/null || true)
	[ -n "$pid" ] && [ -r "/proc/$pid/ns/mnt" ] || return 0
	[ "$(readlink "/proc/$pid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ] && return 0
	if awk -v m="$MNT" '$5 == m' "/proc/$pid/mountinfo" | grep -q ' - btrfs '; then
		return 0
	fi
	die "dockerd (pid $pid) runs in another mount namespace and does not see $MNT: its bind mounts of volumes would miss the quota; run dockerd in the host namespace (no PrivateMounts/MountFlags) or mount $MNT shared before dockerd starts"
}

main() {
	ensure_tools
	if ! healthy; then
		clear_stale
		detach_idle_loops
		make_image
		mount_image
	fi
	# A second loop device of the same image (an earlier run's, now idle) would
	# show btrfs the same filesystem twice.
	detach_idle_loops
	healthy || die "$MNT is not a healthy btrfs mount of $IMG after mounting it"
	# Private: mounts under it (none expected) never propagate to or from the
	# host, and a container's bind mount of a volume stays the container's.
	mount --make-private "$MNT"
	ensure_quotas
	check_dockerd_sees_mount
	say "btrfs with quotas at $MNT ($(mount_source), $(df -h --output=size "$MNT" | tail -n1 | tr -d ' ') , btrfs-progs $(btrfs --version | awk '{print $2}'))"
}

main "$@"
