package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The kernel lets a btrfs subvolume be deleted while processes and containers
// use it (see the package doc), so the btrfs driver looks for users itself.

// usage is what identifies a volume's subvolumes to the busy check.
type usage struct {
	fsDev   string          // "major:minor" of the filesystem in mountinfo
	subvols map[uint64]bool // the volume's subvolume ID and its nested ones
	devs    map[uint64]bool // their st_dev (each subvolume has its own)
	fsPaths []string        // their paths within the filesystem ("/exp/fred-…")
}

// inUse reports the first process or mount found using the volume, "" when
// none is. Processes that exit during the scan, or whose /proc entries this
// process may not read, are passed over: the scan can only miss what it is not
// allowed to see (hence CAP_SYS_PTRACE, see the package doc).
func inUse(ctx context.Context, u usage) (string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return "", fmt.Errorf("volumes: busy check: %w", err)
	}
	seenNS := map[string]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("volumes: busy check: %w", err)
		}
		dir := filepath.Join("/proc", e.Name())
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "mnt")); err == nil && !seenNS[ns] {
			seenNS[ns] = true
			if found := mountUsing(dir, ns, u); found != "" {
				return found, nil
			}
		}
		if found := processUsing(dir, pid, u); found != "" {
			return found, nil
		}
	}
	return "", nil
}

// mountUsing looks through one mount namespace (that of the process at dir)
// for a mount of the volume or of anything inside it.
func mountUsing(dir, ns string, u usage) string {
	table, err := readMountinfo(filepath.Join(dir, "mountinfo"))
	if err != nil {
		return ""
	}
	for _, m := range table {
		if m.FSType != "btrfs" || m.Dev != u.fsDev {
			continue
		}
		inside := u.subvols[m.subvolID()]
		for _, p := range u.fsPaths {
			inside = inside || within(m.Root, p)
		}
		if inside {
			return fmt.Sprintf("%s is mounted at %s in mount namespace %s (of pid %s, %s)",
				m.Root, m.MountPoint, ns, filepath.Base(dir), comm(dir))
		}
	}
	return ""
}

// processUsing reports the process at dir when its cwd, root or an open file
// is inside the volume.
func processUsing(dir string, pid int, u usage) string {
	on := func(p string) bool {
		var st unix.Stat_t
		return unix.Stat(p, &st) == nil && u.devs[uint64(st.Dev)]
	}
	for _, link := range []string{"cwd", "root"} {
		if on(filepath.Join(dir, link)) {
			return fmt.Sprintf("pid %d (%s) has its %s inside it", pid, comm(dir), link)
		}
	}
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return ""
	}
	for _, fd := range fds {
		p := filepath.Join(dir, "fd", fd.Name())
		if on(p) {
			target, _ := os.Readlink(p)
			return fmt.Sprintf("pid %d (%s) holds %s open (fd %s)", pid, comm(dir), target, fd.Name())
		}
	}
	return ""
}

func comm(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
