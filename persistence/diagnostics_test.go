package persistence

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestDiagnostics_PutLatestPrune_AcrossReopen(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDiagnostics(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, diagnosticsFileName))
	if err != nil || fi.Mode() != 0o600 {
		t.Fatalf("diagnostics.db mode %v, %v", fi.Mode(), err)
	}
	t0 := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, lease := range []string{"a", "a", "b", "a"} {
		blob := json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
		if err := d.Put(lease, t0.Add(time.Duration(i)*time.Hour), blob); err != nil {
			t.Fatal(err)
		}
	}
	// Same instant twice: both kept, the later write is the latest.
	if err := d.Put("c", t0, json.RawMessage(`{"n":"first"}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Put("c", t0, json.RawMessage(`{"n":"second"}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Put("a", t0, json.RawMessage(`{not json`)); !IsInputError(err) {
		t.Fatalf("invalid JSON blob: %v", err)
	}
	d.Close()

	d, err = OpenDiagnostics(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for lease, want := range map[string]string{"a": `{"n":3}`, "b": `{"n":2}`, "c": `{"n":"second"}`} {
		got, ok, err := d.Latest(lease)
		if err != nil || !ok || string(got) != want {
			t.Errorf("Latest(%s) = %s, %v, %v; want %s", lease, got, ok, err, want)
		}
	}
	if _, ok, _ := d.Latest("none"); ok {
		t.Error("Latest(none) found something")
	}
	// Prune everything before t0+1h30m: a@0h, a@1h, c@0h ×2 go; b@2h and a@3h stay.
	n, err := d.Prune(t0.Add(90 * time.Minute))
	if err != nil || n != 4 {
		t.Fatalf("Prune = %d, %v; want 4", n, err)
	}
	if _, ok, _ := d.Latest("c"); ok {
		t.Error("lease c survived pruning of all its blobs")
	}
	if got, ok, _ := d.Latest("a"); !ok || string(got) != `{"n":3}` {
		t.Errorf("Latest(a) after prune = %s, %v", got, ok)
	}
	err = d.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDiagLeases).Bucket([]byte("c")) != nil {
			return fmt.Errorf("empty lease bucket c not dropped")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenDiagnostics_UnsafeOrCorrupt_RefusedAndFileUntouched(t *testing.T) {
	setups := map[string]struct {
		setup    func(t *testing.T, path string)
		ceiling  int64
		sentinel error
		fragment string
	}{
		"garbage": {func(t *testing.T, path string) {
			if err := os.WriteFile(path, make([]byte, 32<<10), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0, ErrCorrupt, "is not a valid bbolt database"},
		"mode 0640": {func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o640); err != nil {
				t.Fatal(err)
			}
		}, 0, ErrUnsafeFile, "has mode 0640, want 0600"},
		"symlink": {func(t *testing.T, path string) {
			if err := os.Rename(path, path+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".real", path); err != nil {
				t.Fatal(err)
			}
		}, 0, ErrUnsafeFile, "is a symlink"},
		"over ceiling": {func(*testing.T, string) {}, 4096 * 2, ErrTooLarge, "over the configured ceiling of 8192 bytes"},
		"newer schema": {func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchemaVersion, []byte("9")) }); err != nil {
				t.Fatal(err)
			}
		}, 0, ErrNewerSchema, "has schema version 9"},
	}
	for name, c := range setups {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := OpenDiagnostics(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Put("a", time.Now(), json.RawMessage(`{"x":1}`)); err != nil {
				t.Fatal(err)
			}
			d.Close()
			path := filepath.Join(dir, diagnosticsFileName)
			c.setup(t, path)
			pinned := pinFiles(t, dir)
			d, err = OpenDiagnostics(Options{Dir: dir, MaxFileBytes: c.ceiling})
			if err == nil {
				d.Close()
			}
			assertRefusal(t, err, c.sentinel, "diagnostics.db "+path, c.fragment)
			assertUntouched(t, dir, pinned)
		})
	}
}

func TestOpenDiagnostics_NotIdentityBound(t *testing.T) {
	// diagnostics.db opens in a dir with no storage identity, even in production mode.
	dir := t.TempDir()
	d, err := OpenDiagnostics(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Lstat(filepath.Join(dir, markerFileName)); !os.IsNotExist(err) {
		t.Fatalf("OpenDiagnostics created a marker: %v", err)
	}
}
