// Package volumes is the host side of tenants' durable data: the two
// dockerio.Volumes drivers and the checks berthd runs on volume_data_path and
// volume_mount_path before it trusts them. It works on the host filesystem and
// the btrfs CLI only (no Docker SDK, no cgo).
//
// # Drivers
//
//   - btrfs (Enforced): a volume is a subvolume <root>/<name>; its quota is a
//     limit on the referenced bytes of the subvolume's level-0 qgroup 0/<id>,
//     enforced by the kernel: a write past it fails with EDQUOT ("Disk quota
//     exceeded"), inside a container too (measured through the engine's bind
//     mount: under a 16 MiB limit, fifteen 1 MiB files were written and the
//     sixteenth failed with EDQUOT, the volume then holding 16,760,832 bytes).
//   - dir (not Enforced): plain directories, for development and the embedded
//     default config. Quotas are accepted and not enforced; Usage walks the tree
//     (bounded); Destroy is os.RemoveAll and is never busy — nothing here can
//     tell that a container still uses a plain directory, so a dir-backed volume
//     must only be destroyed after its containers are gone (the lease actor's
//     order anyway).
//
// Open picks the driver: btrfs on btrfs; dir only when asked for by name;
// xfs, zfs and everything else are refused as not supported (this build ships
// no xfs driver: the kernel it is developed and tested on has XFS without quota
// support, so an xfs driver could not be proven).
//
// # Names and safety
//
// Every name is checked against the managed grammar fred-<uuid>-<svc>-<idx>,
// fred-retained-<uuid>-<svc>-<idx> or fred-scratch-<uuid>-<svc>-<idx> (a
// diskless instance's seeded writable paths) before anything touches the disk. An entry
// under the root that is a symlink, not a directory, or (btrfs) a plain
// directory instead of a subvolume is refused with an error naming it and is
// never changed or deleted. Ensure gives only the subdirectory mount points to
// the image user (Lchown, never recursive, never following a link); existing
// content keeps its owners.
//
// # What was measured on the development kernel (Linux 6.18, btrfs-progs v6.2)
//
// Qgroup accounting lags: the referenced bytes of a subvolume move only when a
// transaction commits (every 30 s by default), so right after a write
// `btrfs qgroup show` still reports the old number (measured: 0 bytes right
// after writing 4 MiB into a fresh subvolume). Usage therefore asks for
// `btrfs qgroup show --sync`, which commits first (≈10 ms on the test image)
// and then reports the bytes exactly; when btrfs says the accounting is
// inconsistent, Usage runs `btrfs quota rescan -w` and reads again. Enforcement
// does not lag: the kernel reserves qgroup space at write time.
//
// A subvolume delete is NOT refused by the kernel while the volume is in use:
// `btrfs subvolume delete` succeeded while a process held a file open inside
// the subvolume, while a process had its working directory there, while a
// subdirectory was bind-mounted elsewhere, and while a running container
// bind-mounted its data/ subdirectory at /data (the container kept running on
// the deleted subvolume). The kernel refuses only a subvolume something is
// mounted *on* (then the path no longer even reaches it), one holding other
// subvolumes (ENOTEMPTY), an active swapfile or a running send. So the btrfs
// driver checks by itself before deleting:
// a volume is busy (dockerio.ErrVolumeBusy) while any mount, in any process's
// mount namespace, is a mount of the volume's subvolume or of a path inside it
// (/proc/<pid>/mountinfo: same filesystem, subvolid= or root inside it), or
// while any process has a file, its cwd or its root inside it (stat of
// /proc/<pid>/fd/*, cwd, root: every btrfs subvolume has a device number of
// its own). A file that is only memory-mapped after its descriptor was closed
// is not seen. The check and the delete are not atomic: callers serialise
// work per lease, so nothing of the lease starts in between. A kernel EBUSY,
// and ENOTEMPTY (a nested subvolume appeared during the delete), also map to
// ErrVolumeBusy.
//
// A tenant can create a nested subvolume inside its volume: subvolume creation
// needs no privilege (measured: uid 1000 without capabilities ran
// `btrfs subvolume create`), and a nested subvolume has a qgroup of its own,
// outside the volume's limit (measured: 20 MiB written into a nested subvolume
// of a volume limited to 8 MiB). The driver counts nested subvolumes in Usage
// and deletes them (deepest first) before the volume, but it cannot enforce
// the volume's limit on them; the tenant seccomp profile
// (dockerio/engine/seccomp.go) refuses the BTRFS_IOC_SUBVOL_CREATE /
// SNAP_CREATE ioctls to every tenant container, which closes that hole.
//
// A deleted subvolume's qgroup stays, reported "<stale>" and with 0 bytes,
// until the cleaner has dropped the subvolume; `btrfs qgroup destroy` fails
// with EBUSY until then. Destroy waits for the cleaner
// (`btrfs subvolume sync <root> <id>`, bounded by ctx) and then destroys the
// qgroup; on this kernel (6.8 and later) the kernel has already removed it by
// then (destroy answers ENOENT, which is success). btrfs-progs v6.2 has no
// `subvolume delete --delete-qgroup`.
//
// btrfs-progs v6.2's JSON output (`btrfs --format json qgroup show`) aborts
// with "INTERNAL ERROR: unknown unit base" as soon as any qgroup has a limit;
// the driver parses the text table of `btrfs qgroup show -re --raw` by its
// header instead.
//
// # Capabilities
//
// The btrfs driver runs the btrfs CLI as a child process, which must hold:
// CAP_SYS_ADMIN (qgroup limit, subvolume delete, qgroup destroy, quota rescan);
// CAP_CHOWN (giving each mount point to the image user, root included);
// CAP_DAC_OVERRIDE and CAP_FOWNER (working on tenant-owned trees, e.g. the dir
// driver's RemoveAll and Usage walk); CAP_SYS_PTRACE (reading other processes'
// /proc/<pid>/fd for the busy check; without it the check cannot see
// processes of other users). Grant them ambiently on the systemd unit
// (AmbientCapabilities=CAP_SYS_ADMIN CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER
// CAP_SYS_PTRACE): a file capability on berthd does not reach the btrfs
// children it execs. Open refuses a btrfs root without CAP_SYS_ADMIN and
// CAP_CHOWN rather than provision volumes whose quota it cannot set.
package volumes
