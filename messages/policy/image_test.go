package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func paths(n int, f func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func TestVolumes_AdmissionRules(t *testing.T) {
	long := "/" + strings.Repeat("a", MaxVolumePathBytes-1) // exactly the limit
	for _, c := range []struct {
		name    string
		volumes []string
		refused string // substring of the refusal; "" = admitted
	}{
		{"none", nil, ""},
		{"one", []string{"/data"}, ""},
		{"siblings with a shared name prefix", []string{"/data", "/data2", "/var/lib/db"}, ""},
		{"sixteen", paths(16, func(i int) string { return fmt.Sprintf("/v%02d", i) }), ""},
		{"seventeen", paths(17, func(i int) string { return fmt.Sprintf("/v%02d", i) }), "17 VOLUMEs, at most 16"},
		{"path at the byte limit", []string{long}, ""},
		{"path over the byte limit", []string{long + "b"}, "4097 bytes long"},
		{"combined bytes over 16 KiB", paths(5, func(i int) string { return fmt.Sprintf("/%d%s", i, strings.Repeat("x", 3400)) }), "at most 16384"},
		{"relative", []string{"data"}, "not a canonical absolute path"},
		{"trailing slash", []string{"/data/"}, "not a canonical absolute path"},
		{"dot-dot", []string{"/a/../b"}, "not a canonical absolute path"},
		{"double slash", []string{"//data"}, "not a canonical absolute path"},
		{"empty", []string{""}, "not a canonical absolute path"},
		{"root", []string{"/"}, "mask the root filesystem"},
		{"tmp", []string{"/tmp"}, "mask /tmp"},
		{"run", []string{"/run"}, "mask /run"},
		{"below tmp is fine", []string{"/tmp/cache"}, ""},
		{"proc", []string{"/proc"}, "the /proc tree"},
		{"inside sys", []string{"/sys/fs/cgroup"}, "the /sys tree"},
		{"inside dev", []string{"/dev/shm"}, "the /dev tree"},
		{"wp", []string{"/_wp"}, "the /_wp tree"},
		{"inside wp", []string{"/_wp/x"}, "the /_wp tree"},
		{"dev-like sibling is fine", []string{"/devices", "/procfs"}, ""},
		{"nested", []string{"/data", "/data/sub"}, `"/data" and "/data/sub" overlap`},
		{"nested deep, unsorted", []string{"/srv/a/b/c", "/x", "/srv/a"}, "overlap"},
		{"duplicate", []string{"/data", "/data"}, "overlap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Volumes(c.volumes)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("Volumes(%.80q) = %v, want admitted", c.volumes, err)
				}
				if !slices.IsSorted(got) || len(got) != len(c.volumes) {
					t.Errorf("admitted volumes %v, want the input sorted", got)
				}
				return
			}
			if !errors.Is(err, ErrImageNotAdmissible) || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("Volumes(%.80q) = %v, want ErrImageNotAdmissible mentioning %q", c.volumes, err, c.refused)
			}
		})
	}
}

func TestLabels_CountAndSizeLimits(t *testing.T) {
	many := func(n, valueSize int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("l%03d", i)] = strings.Repeat("v", valueSize)
		}
		return m
	}
	for _, c := range []struct {
		name    string
		labels  map[string]string
		refused string
	}{
		{"none", nil, ""},
		{"128 labels", many(128, 1), ""},
		{"129 labels", many(129, 1), "129 labels, at most 128"},
		{"64 KiB exactly", many(16, 4096-4), ""}, // 16 × (4-byte key + 4092) = 65536
		{"over 64 KiB", many(16, 4096-3), "at most 65536"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Labels(c.labels)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("Labels = %v, want admitted", err)
				}
				return
			}
			if !errors.Is(err, ErrImageNotAdmissible) || !strings.Contains(err.Error(), c.refused) {
				t.Fatalf("Labels = %v, want ErrImageNotAdmissible mentioning %q", err, c.refused)
			}
		})
	}
}

// Reserved image labels are refused, case-insensitively, except the four exact
// Compose build stamps, which are reported (their values are discarded).
func TestLabels_ReservedNamespacesRefusedCaseInsensitiveExceptComposeBuildStamps(t *testing.T) {
	stamps := map[string]string{
		"com.docker.compose.project":       "stamp",
		"com.docker.compose.service":       "stamp",
		"com.docker.compose.version":       "stamp",
		"com.docker.compose.image.builder": "classic",
		"org.opencontainers.image.title":   "fine",
		"fredx.not-reserved":               "fine",
		"traefik":                          "no dot: fine",
		"maintainer":                       "fine",
	}
	want := []string{"com.docker.compose.image.builder", "com.docker.compose.project", "com.docker.compose.service", "com.docker.compose.version"}
	img, err := Admit([]string{"/data"}, stamps)
	if err != nil || !slices.Equal(img.MaskLabels, want) || !slices.Equal(img.Volumes, []string{"/data"}) {
		t.Errorf("Admit(build stamps) = %+v, %v", img, err)
	}
	if got := MaskLabels(stamps); !slices.Equal(got, want) {
		t.Errorf("MaskLabels = %v, want %v", got, want)
	}
	for _, key := range []string{"fred.tenant", "FRED.Lease_UUID", "traefik.enable", "Traefik.http.routers.x.rule",
		"COM.DOCKER.COMPOSE.PROJECT", "com.docker.compose.oneoff", "com.docker.compose.container-number"} {
		labels := maps.Clone(stamps)
		labels[key] = "x"
		_, err := Admit(nil, labels)
		if !errors.Is(err, ErrImageNotAdmissible) || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("Admit with label %q = %v, want ErrImageNotAdmissible naming it", key, err)
		}
	}
	if _, err := Admit([]string{"/proc/x"}, nil); !errors.Is(err, ErrImageNotAdmissible) {
		t.Errorf("Admit with a masking VOLUME = %v", err)
	}
	if _, err := Admit([]string{"/a:b"}, nil); !errors.Is(err, ErrImageNotAdmissible) {
		t.Errorf("Admit with a VOLUME holding ':' = %v", err)
	}
	if _, err := Admit(nil, many129()); !errors.Is(err, ErrImageNotAdmissible) {
		t.Errorf("Admit with 129 labels = %v", err)
	}
}

func many129() map[string]string {
	m := map[string]string{}
	for i := range 129 {
		m[fmt.Sprint(i)] = ""
	}
	return m
}

func TestTmpfsOverlap_EqualNestedEitherWayRefused(t *testing.T) {
	vols := []string{"/data", "/var/lib/db"}
	for _, c := range []struct {
		tmpfs   []string
		refused bool
	}{
		{nil, false},
		{[]string{"/cache", "/data2"}, false},
		{[]string{"/data"}, true},
		{[]string{"/data/tmp"}, true},
		{[]string{"/var"}, true},
		{[]string{"/var/lib/db/x"}, true},
	} {
		err := TmpfsOverlap(c.tmpfs, vols)
		if refused := err != nil; refused != c.refused || (refused && !errors.Is(err, ErrImageNotAdmissible)) {
			t.Errorf("TmpfsOverlap(%v, %v) = %v, want refused=%v", c.tmpfs, vols, err, c.refused)
		}
	}
}
