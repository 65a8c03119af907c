package dockerio

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages/manifest"
)

func TestWritablePaths_CanonicalDisjointAtMostFourOneDirPerInstance(t *testing.T) {
	base := ServicePlan{Service: manifest.Service{Tmpfs: []string{"/cache"}}, Quantity: 2, ImageVolumes: []string{"/data"}}
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
		err := CheckWritablePaths(svc)
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
	req := SeedRequest{ImageID: "sha256:x", Paths: []string{"/var/lib/a"}, Dirs: []string{"/v/0"}, MaxEntries: 1, MaxBytes: 1}
	if err := CheckSeedRequest(req); err != nil {
		t.Errorf("SeedRequest = %v", err)
	}
	for _, bad := range []func(r *SeedRequest){
		func(r *SeedRequest) { r.Dirs = nil },
		func(r *SeedRequest) { r.MaxEntries = 0 },
		func(r *SeedRequest) { r.UID = -1 },
		func(r *SeedRequest) { r.Paths = []string{"/run/x"} },
	} {
		r := req
		bad(&r)
		if err := CheckSeedRequest(r); err == nil {
			t.Errorf("SeedRequest(%+v) admitted", r)
		}
	}
}

func TestMountBudget_WorstCaseAcrossTheLease(t *testing.T) {
	svc := ServicePlan{Quantity: 1, ImageVolumes: []string{"/" + strings.Repeat("v", 4000)}}
	plan := Plan{ReadonlyRootfs: true, Services: []ServicePlan{svc}}
	// An instance: 4,000 + 9 + 4 × 266 = 5,073 bytes, 7 mounts: 6,614 instances fit the bytes.
	plan.Services[0].Quantity = 6614
	if err := CheckMountBudget(plan); err == nil || !strings.Contains(err.Error(), "16384") {
		t.Errorf("6,614 instances of 7 mounts: %v", err) // 46,298 mounts
	}
	plan.Services[0].Quantity = 2340 // 16,380 mounts, 11.9 MB
	if err := CheckMountBudget(plan); err != nil {
		t.Errorf("2,340 instances: %v", err)
	}
	plan.Services[0].ImageVolumes = []string{"/" + strings.Repeat("v", 4090), "/" + strings.Repeat("w", 4090), "/" + strings.Repeat("x", 4090), "/" + strings.Repeat("y", 4090)}
	plan.ReadonlyRootfs = false
	plan.Services[0].Quantity = 2100 // 8,400 mounts; 2,100 × 16,364 bytes = 34.4 MB > 32 MiB
	if err := CheckMountBudget(plan); !errors.Is(err, ErrImageNotAdmissible) || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("32.7 MB of targets: %v", err)
	}
}

// A volume is writable-path-only when its top holds nothing, or only the _wp
// directory; anything else might be data and keeps it.
func TestWritablePathOnly(t *testing.T) {
	wp := VolumeEntry{Name: WritableRoot, Dir: true}
	for _, c := range []struct {
		name    string
		entries []VolumeEntry
		want    bool
	}{
		{"empty: nothing to keep", nil, true},
		{"only the _wp tree", []VolumeEntry{wp}, true},
		{"a VOLUME's subdirectory, even empty", []VolumeEntry{wp, {Name: "data", Dir: true}}, false},
		{"a VOLUME's subdirectory alone", []VolumeEntry{{Name: "var%2Flib%2Fdb", Dir: true}}, false},
		{"_wp that is not a directory (a file or a symlink)", []VolumeEntry{{Name: WritableRoot}}, false},
		{"a stray file beside _wp", []VolumeEntry{wp, {Name: "notes.txt"}}, false},
		{"a name that only looks like _wp", []VolumeEntry{{Name: "_wp2", Dir: true}}, false},
	} {
		if got := WritablePathOnly(c.entries); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
