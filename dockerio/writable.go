package dockerio

import (
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/messages/policy"
)

// Writable paths (seed: Image admission, SKU storage table). Stock images write
// at start outside their declared VOLUMEs (nginx: /var/lib/nginx); under a
// read-only rootfs such a directory gets a writable mount of its own, seeded
// with the image's content. Detection finds them (Engine.DetectWritablePaths),
// seeding copies them to the host (Engine.SeedWritablePaths), the plan mounts
// them (ServicePlan.WritablePaths, WritableDirs).

// MaxWritablePaths bounds the writable paths of one instance; the lease mount
// budget reserves this many per instance before detection.
const MaxWritablePaths = policy.MaxWritablePaths

// WritableRoot is the directory of an instance's managed (or scratch) volume
// whose subdirectory VolumeSubdir(target) is mounted at a writable path. No
// VOLUME's subdirectory is named so: admission refuses a VOLUME in the /_wp tree.
const WritableRoot = "_wp"

// WritableQuery asks which directories of an image a container writes at
// start: the effective user (the manifest's, else the image's USER) and
// program (effective entrypoint, else command) come from the image and the
// manifest's overrides; the tenant's tmpfs targets are never writable paths.
type WritableQuery struct {
	manifest.Service // the tenant's service as admitted
	ImageID          string
}

// Writable is what detection found for one query.
type Writable struct {
	// Paths are the detected writable paths, at most MaxWritablePaths, in scan
	// order (parents in the fixed order, names sorted within one).
	Paths []string
	// UID and GID are the numeric user the container runs as: each mount point
	// belongs to it.
	UID, GID int
	Program  string   // the program name the name rule matched against ("" = none)
	Dropped  []string // matched beyond MaxWritablePaths, not mounted
	Refused  []string // "path: why" — a matching symlink, one over or under a VOLUME or tmpfs, an unusable name
	Cut      []string // archives read (a parent, or /var for its four) that stopped at a bound: later entries unseen
}

// SeedRequest asks for the image's content of Paths copied into every one of
// Dirs, each as <dir>/_wp/<VolumeSubdir(path)>.
type SeedRequest struct {
	ImageID string
	Paths   []string
	// Dirs are host directories berth made (managed or scratch volumes), one
	// per instance. Their _wp tree is replaced whole; nothing else in them is
	// touched.
	Dirs []string
	// UID and GID own each mount point (the top directory of a path); the
	// content keeps the image's ownership.
	UID, GID int
	// MaxEntries caps the archive entries of one directory's seed (quota bytes
	// / min_avg_file_bytes); MaxBytes caps the bytes of its files (the quota).
	MaxEntries int
	MaxBytes   int64
}

// VolumeEntry is one entry at the top of a volume: an image VOLUME's
// subdirectory (VolumeSubdir), the WritableRoot tree, or anything else.
type VolumeEntry struct {
	Name string
	Dir  bool // a directory (never a symlink to one)
}

// WritablePathOnly reports whether a volume whose top holds entries keeps
// nothing a restore could use: nothing at all, or only the WritableRoot
// directory, whose writable-path copies every launch reseeds from the image.
// Anything else — a VOLUME's subdirectory, even empty, a file, a symlink — is
// data, or might be: the volume is kept (any doubt retains).
func WritablePathOnly(entries []VolumeEntry) bool {
	for _, e := range entries {
		if e.Name != WritableRoot || !e.Dir {
			return false
		}
	}
	return true
}
