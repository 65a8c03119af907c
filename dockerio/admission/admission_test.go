package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/dockerio"
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
			if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), c.refused) {
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
			if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), c.refused) {
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
		if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("Admit with label %q = %v, want ErrImageNotAdmissible naming it", key, err)
		}
	}
	if _, err := Admit([]string{"/proc/x"}, nil); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("Admit with a masking VOLUME = %v", err)
	}
	if _, err := Admit([]string{"/a:b"}, nil); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("Admit with a VOLUME holding ':' = %v", err)
	}
	if _, err := Admit(nil, many129()); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
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
		if refused := err != nil; refused != c.refused || (refused && !errors.Is(err, dockerio.ErrImageNotAdmissible)) {
			t.Errorf("TmpfsOverlap(%v, %v) = %v, want refused=%v", c.tmpfs, vols, err, c.refused)
		}
	}
}

func TestWritablePaths_CanonicalDisjointAtMostFourOneDirPerInstance(t *testing.T) {
	base := dockerio.ServicePlan{Quantity: 2, ImageVolumes: []string{"/data"}, Tmpfs: []string{"/cache"}}
	for _, c := range []struct {
		paths, dirs []string
		refused     string
	}{
		{[]string{"/var/lib/nginx", "/var/log/nginx"}, nil, ""},
		{[]string{"/var/lib/nginx"}, []string{"/v/0", "/v/1"}, ""},
		{[]string{"/a", "/b", "/c", "/d", "/e"}, nil, "at most 4"},
		{[]string{"/var/lib/x:y"}, nil, "without ':'"},
		{[]string{"/var/lib/../etc"}, nil, "canonical"},
		{[]string{"/proc/x"}, nil, "mask"},
		{[]string{"/var/lib", "/var/lib/x"}, nil, "overlap"},
		{[]string{"/data/db"}, nil, `overlaps "/data"`},
		{[]string{"/cache"}, nil, `overlaps "/cache"`},
		{[]string{"/tmp/x"}, nil, `overlaps "/tmp"`},
		{[]string{"/var/lib/x"}, []string{"/v/0"}, "2 instances but 1"},
		{[]string{"/var/lib/x"}, []string{"/v/0", "v/1"}, "not a clean absolute path"},
	} {
		svc := base
		svc.WritablePaths, svc.WritableDirs = c.paths, c.dirs
		err := WritablePaths(svc)
		if c.refused == "" {
			if err != nil {
				t.Errorf("WritablePaths(%v, %v) = %v", c.paths, c.dirs, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("WritablePaths(%v, %v) = %v, want refused: %q", c.paths, c.dirs, err, c.refused)
		}
	}
	req := dockerio.SeedRequest{ImageID: "sha256:x", Paths: []string{"/var/lib/a"}, Dirs: []string{"/v/0"}, MaxEntries: 1, MaxBytes: 1}
	if err := SeedRequest(req); err != nil {
		t.Errorf("SeedRequest = %v", err)
	}
	for _, bad := range []func(r *dockerio.SeedRequest){
		func(r *dockerio.SeedRequest) { r.Dirs = nil },
		func(r *dockerio.SeedRequest) { r.MaxEntries = 0 },
		func(r *dockerio.SeedRequest) { r.UID = -1 },
		func(r *dockerio.SeedRequest) { r.Paths = []string{"/run/x"} },
	} {
		r := req
		bad(&r)
		if err := SeedRequest(r); err == nil {
			t.Errorf("SeedRequest(%+v) admitted", r)
		}
	}
}

func TestMountBudget_WorstCaseAcrossTheLease(t *testing.T) {
	svc := dockerio.ServicePlan{Quantity: 1, ImageVolumes: []string{"/" + strings.Repeat("v", 4000)}}
	plan := dockerio.Plan{ReadonlyRootfs: true, Services: []dockerio.ServicePlan{svc}}
	// An instance: 4,000 + 9 + 4 × 266 = 5,073 bytes, 7 mounts: 6,614 instances fit the bytes.
	plan.Services[0].Quantity = 6614
	if err := MountBudget(plan); err == nil || !strings.Contains(err.Error(), "16384") {
		t.Errorf("6,614 instances of 7 mounts: %v", err) // 46,298 mounts
	}
	plan.Services[0].Quantity = 2340 // 16,380 mounts, 11.9 MB
	if err := MountBudget(plan); err != nil {
		t.Errorf("2,340 instances: %v", err)
	}
	plan.Services[0].ImageVolumes = []string{"/" + strings.Repeat("v", 4090), "/" + strings.Repeat("w", 4090), "/" + strings.Repeat("x", 4090), "/" + strings.Repeat("y", 4090)}
	plan.ReadonlyRootfs = false
	plan.Services[0].Quantity = 2100 // 8,400 mounts; 2,100 × 16,364 bytes = 34.4 MB > 32 MiB
	if err := MountBudget(plan); !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("32.7 MB of targets: %v", err)
	}
}
