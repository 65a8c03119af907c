package policy

// The admission of an image's metadata before berth lets it near a tenant
// container (seed: Image admission, Container Labels): its VOLUME targets and
// its labels. The real engine (dockerio/engine) and the in-memory fake both
// call it, so they refuse exactly the same images.

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Limits on image metadata (seed: "at most 16 VOLUME targets (4,096 bytes per
// path, 16 KiB combined) and 128 labels (64 KiB of combined keys and values)").
const (
	MaxVolumes         = 16
	MaxVolumePathBytes = 4096
	MaxVolumeBytes     = 16 << 10
	MaxLabels          = 128
	MaxLabelBytes      = 64 << 10
)

// reservedPrefixes are the label namespaces berth, Traefik and Compose own,
// matched case-insensitively.
var reservedPrefixes = []string{"fred.", "traefik.", "com.docker.compose."}

// composeBuildStamps are the four exact keys Compose's classic builder stamps
// into images: the only reserved keys an image may carry. Compose and berth
// write their own values on every container, so the image's are discarded.
var composeBuildStamps = map[string]bool{
	"com.docker.compose.project":       true,
	"com.docker.compose.service":       true,
	"com.docker.compose.version":       true,
	"com.docker.compose.image.builder": true,
}

// Image is the admitted view of an image's metadata.
type Image struct {
	Volumes    []string // VOLUME targets, sorted
	MaskLabels []string // the Compose build stamps the image carries, sorted
}

// ErrImageNotAdmissible: the image's metadata breaks an admission limit (VOLUME
// targets, label count or size, a reserved label, the lease mount budget); it
// can never be launched here: an invalid argument. dockerio.ErrImageNotAdmissible
// is this error.
var ErrImageNotAdmissible = errdefs.ErrInvalidArgument.WithMessage("image metadata not admissible")

// Admit checks an image's declared VOLUME targets and labels. A violation wraps
// ErrImageNotAdmissible and says which rule it broke.
func Admit(volumes []string, labels map[string]string) (Image, error) {
	vols, err := Volumes(volumes)
	if err != nil {
		return Image{}, err
	}
	if err := Labels(labels); err != nil {
		return Image{}, err
	}
	return Image{Volumes: vols, MaskLabels: MaskLabels(labels)}, nil
}

// Volumes admits VOLUME targets and returns them sorted: at most MaxVolumes,
// each a canonical absolute path of at most MaxVolumePathBytes, MaxVolumeBytes
// in all, none inside another, none masking a path the runtime needs.
func Volumes(volumes []string) ([]string, error) {
	if len(volumes) > MaxVolumes {
		return nil, refuse("it declares %d VOLUMEs, at most %d are supported", len(volumes), MaxVolumes)
	}
	total := 0
	for _, v := range volumes {
		total += len(v)
		if len(v) > MaxVolumePathBytes {
			return nil, refuse("VOLUME %.64q… is %d bytes long, at most %d", v, len(v), MaxVolumePathBytes)
		}
		if !Canonical(v) {
			return nil, refuse("VOLUME %q is not a canonical absolute path", v)
		}
		if strings.ContainsRune(v, ':') {
			// A diskless VOLUME is a tmpfs, given to Docker as "target:options".
			return nil, refuse("VOLUME %q contains ':'", v)
		}
		if m := masked(v); m != "" {
			return nil, refuse("VOLUME %q would mask %s", v, m)
		}
	}
	if total > MaxVolumeBytes {
		return nil, refuse("its VOLUME paths take %d bytes, at most %d", total, MaxVolumeBytes)
	}
	sorted := slices.Clone(volumes)
	slices.Sort(sorted)
	// Sorted, a path is followed directly by the paths below it (and its duplicates).
	for i := 1; i < len(sorted); i++ {
		if Overlap(sorted[i-1], sorted[i]) {
			return nil, refuse("VOLUMEs %q and %q overlap", sorted[i-1], sorted[i])
		}
	}
	return sorted, nil
}

// Labels admits an image's labels: at most MaxLabels, MaxLabelBytes of keys and
// values in all, none in a reserved namespace but the four Compose build
// stamps (an image could otherwise claim fred.tenant or traefik.enable on a
// tenant's container: Docker copies every image label the container does not set).
func Labels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return refuse("it carries %d labels, at most %d", len(labels), MaxLabels)
	}
	total := 0
	for k, v := range labels {
		total += len(k) + len(v)
	}
	if total > MaxLabelBytes {
		return refuse("its labels take %d bytes, at most %d", total, MaxLabelBytes)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if Reserved(k) && !composeBuildStamps[k] {
			return refuse("its label %q is in a reserved namespace (fred., traefik., com.docker.compose.)", k)
		}
	}
	return nil
}

// MaskLabels returns the Compose build stamps among labels, sorted.
func MaskLabels(labels map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if composeBuildStamps[k] {
			out = append(out, k)
		}
	}
	return out
}

// Reserved reports whether key lies in the fred., traefik. or com.docker.compose.
// namespace, in any letter case.
func Reserved(key string) bool {
	lower := strings.ToLower(key)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// Canonical reports an absolute path in its cleaned form ("/a/b", not "/a/../b/").
func Canonical(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// Overlap reports whether one path is the other or lies below it.
func Overlap(a, b string) bool {
	return a == b || within(a, b) || within(b, a)
}

// within reports whether p lies strictly below dir.
func within(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// masked names what a VOLUME at target would hide: the root, the runtime's
// /tmp and /run, anything of the kernel's /proc, /sys and /dev trees, or Fred's
// reserved /_wp tree. "" when none.
func masked(target string) string {
	switch target {
	case "/":
		return "the root filesystem"
	case "/tmp", "/run":
		return target
	}
	for _, tree := range []string{"/proc", "/sys", "/dev", "/_wp"} {
		if target == tree || within(target, tree) {
			return "the " + tree + " tree"
		}
	}
	return ""
}

// TmpfsOverlap refuses tenant tmpfs targets that overlap an image VOLUME target:
// one mount would silently hide the other.
func TmpfsOverlap(tmpfs, volumes []string) error {
	for _, t := range tmpfs {
		for _, v := range volumes {
			if Overlap(t, v) {
				return refuse("tenant tmpfs %q overlaps image VOLUME %q", t, v)
			}
		}
	}
	return nil
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrImageNotAdmissible, fmt.Sprintf(format, args...))
}

// User is an image or manifest user ("name", "uid", "name:group", "uid:gid",
// …) split into its parts; UID and GID are -1 where that part is a name or, for
// the group, absent.
type User struct {
	Name, Group string // as written ("" for a numeric part or an absent group)
	UID, GID    int
}

// ParseUser splits user. An empty user is root (0:0). A part that is all
// digits is numeric; anything else is a name, to be looked up in the image's
// own /etc/passwd or /etc/group.
func ParseUser(user string) (User, error) {
	u := User{UID: -1, GID: -1}
	if user == "" {
		return User{UID: 0, GID: 0}, nil
	}
	name, group, hasGroup := strings.Cut(user, ":")
	if name == "" || (hasGroup && group == "") || strings.ContainsAny(user, " \t\n/") {
		return User{}, fmt.Errorf("user %q is not name[:group] or uid[:gid]", user)
	}
	num := func(s string) (int, bool) {
		if s == "" || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseUint(s, 10, 32)
		return int(n), err == nil
	}
	if n, ok := num(name); ok {
		u.UID = n
	} else {
		u.Name = name
	}
	if hasGroup {
		if n, ok := num(group); ok {
			u.GID = n
		} else {
			u.Group = group
		}
	}
	return u, nil
}
