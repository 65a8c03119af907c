package volumes

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// mountEntry is one line of /proc/<pid>/mountinfo (proc(5)).
type mountEntry struct {
	ID         int
	Parent     int
	Dev        string // "major:minor" of the filesystem (its superblock)
	Root       string // the path, within the filesystem, that is mounted
	MountPoint string
	FSType     string
	Source     string
	SuperOpts  string // e.g. "rw,space_cache=v2,subvolid=5,subvol=/"
}

// subvolID is the btrfs subvolume the mount's root is in (its subvolid=
// super option), or 0.
func (m mountEntry) subvolID() uint64 {
	for _, o := range strings.Split(m.SuperOpts, ",") {
		if v, ok := strings.CutPrefix(o, "subvolid="); ok {
			id, _ := strconv.ParseUint(v, 10, 64)
			return id
		}
	}
	return 0
}

type mountTable []mountEntry

// maxMountinfoBytes bounds one mountinfo read (a host with tens of thousands of
// mounts is far below it).
const maxMountinfoBytes = 64 << 20

func readMountinfo(path string) (mountTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("volumes: read mount table: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMountinfoBytes+1))
	if err != nil {
		return nil, fmt.Errorf("volumes: read %s: %w", path, err)
	}
	if len(b) > maxMountinfoBytes {
		return nil, fmt.Errorf("volumes: %s is larger than %d bytes", path, maxMountinfoBytes)
	}
	return parseMountinfo(string(b))
}

// parseMountinfo parses mountinfo text:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// Optional fields run until the lone "-"; paths are octal-escaped (\040).
func parseMountinfo(text string) (mountTable, error) {
	var out mountTable
	for n, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 0 || len(fields) < sep+3 {
			return nil, fmt.Errorf("volumes: mountinfo line %d is malformed: %q", n+1, line)
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("volumes: mountinfo line %d has bad mount IDs: %q", n+1, line)
		}
		e := mountEntry{ID: id, Parent: parent, Dev: fields[2], Root: unescapeOctal(fields[3]),
			MountPoint: unescapeOctal(fields[4]), FSType: fields[sep+1], Source: unescapeOctal(fields[sep+2])}
		if len(fields) > sep+3 {
			e.SuperOpts = fields[sep+3]
		}
		out = append(out, e)
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline and
// backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// at is the mount whose mount point is exactly p; of several stacked there,
// the last (the one on top, which path lookups reach).
func (t mountTable) at(p string) (mountEntry, bool) {
	var found mountEntry
	ok := false
	for _, m := range t {
		if m.MountPoint == p {
			found, ok = m, true
		}
	}
	return found, ok
}

// holding is the mount p is on: the longest mount point that is p or an
// ancestor of it, the last of those stacked on the same point.
func (t mountTable) holding(p string) (mountEntry, bool) {
	var found mountEntry
	best := -1
	for _, m := range t {
		if within(p, m.MountPoint) && len(m.MountPoint) >= best {
			found, best = m, len(m.MountPoint)
		}
	}
	return found, best >= 0
}
