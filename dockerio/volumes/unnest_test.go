package volumes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
)

// Unnest moves fred v0.13's nested targets onto berthd's escaped names on both
// drivers, keeps one-element targets and what else shares a parent, is a no-op
// when run again, gives way over an empty escaped directory and refuses when
// both sides hold data.
func TestUnnest_FredsNestedTargetsMoveOntoBerthsLayout_Idempotent_BothDrivers(t *testing.T) {
	for kind, v := range bothDrivers(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			name := volName("web", 0)
			targets := []string{"/data", "/var/lib/data", "/var/lib/other", "/srv/www/html"}
			if err := v.Unnest(ctx, name, targets); !errdefs.IsNotFound(err) {
				t.Fatalf("absent volume: %v, want NotFound", err)
			}
			p, err := v.Ensure(ctx, name, 16, nil, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			// fred's layout: data, var/lib/data (with a file), var/lib/other,
			// srv/www/html; and berthd's empty escaped dir of the last.
			for _, d := range []string{"data", "var/lib/data/sub", "var/lib/other", "srv/www/html", "srv%2Fwww%2Fhtml"} {
				if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(p, "var/lib/data/sub/kept.txt"), []byte("kept"), 0o644); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second run finds it done
				if err := v.Unnest(ctx, name, targets); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := os.ReadFile(filepath.Join(p, "var%2Flib%2Fdata/sub/kept.txt")); err != nil || string(got) != "kept" {
				t.Fatalf("the moved data: %q %v", got, err)
			}
			var top []string
			ents, _ := os.ReadDir(p)
			for _, e := range ents {
				top = append(top, e.Name())
			}
			if want := []string{"data", "srv%2Fwww%2Fhtml", "var%2Flib%2Fdata", "var%2Flib%2Fother"}; !slices.Equal(top, want) {
				t.Fatalf("top of the volume: %v, want %v (fred's empty parents gone)", top, want)
			}

			// Data on both sides: refused, nothing moved.
			if err := os.MkdirAll(filepath.Join(p, "opt/app/state"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(p, "opt%2Fapp%2Fstate/x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := v.Unnest(ctx, name, []string{"/opt/app/state"}); err == nil {
				t.Fatal("both layouts holding data: moved anyway")
			}
			if _, err := os.Stat(filepath.Join(p, "opt/app/state")); err != nil {
				t.Fatalf("the refused move touched fred's side: %v", err)
			}
		})
	}
}
