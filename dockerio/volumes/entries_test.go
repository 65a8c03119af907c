package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
)

// Entries reads a volume's top as a retaining close judges it, on both
// drivers: directories as directories, a symlink to one and a file as
// neither, an absent volume NotFound, a top too big to judge an error.
func TestEntries_TopOfTheVolume_BothDrivers(t *testing.T) {
	for kind, v := range bothDrivers(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			name := volName("web", 0)
			if _, err := v.Entries(ctx, name); !errdefs.IsNotFound(err) {
				t.Fatalf("absent volume: %v, want NotFound", err)
			}
			p, err := v.Ensure(ctx, name, 16, []string{"data"}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(p, dockerio.WritableRoot, "var%2Flib%2Fapp"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("data", filepath.Join(p, "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "file"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := v.Entries(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b dockerio.VolumeEntry) int { return strings.Compare(a.Name, b.Name) })
			want := []dockerio.VolumeEntry{{Name: dockerio.WritableRoot, Dir: true}, {Name: "data", Dir: true}, {Name: "file"}, {Name: "link"}}
			if !slices.Equal(got, want) {
				t.Fatalf("entries %+v, want %+v", got, want)
			}
			for i := range dockerio.MaxVolumeEntries {
				if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := v.Entries(ctx, name); err == nil {
				t.Fatalf("a top of %d entries was read whole", dockerio.MaxVolumeEntries+4)
			}
			if err := v.Destroy(ctx, name); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// bothDrivers are a dir driver on a temp dir and, where the btrfs test mount
// is (or must be) there, a btrfs one, by kind.
func bothDrivers(t *testing.T) map[string]dockerio.Volumes {
	t.Helper()
	dir, err := NewDir(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	drivers := map[string]dockerio.Volumes{"dir": dir}
	if os.Getenv("BERTH_TEST_BTRFS") != "" || required() {
		d, _ := btrfsVolumes(t)
		drivers["btrfs"] = d
	}
	return drivers
}
