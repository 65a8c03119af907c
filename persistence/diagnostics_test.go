package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// freshDiagnosticsSize is the size of a newly created, empty diagnostics.db.
func freshDiagnosticsSize(t *testing.T) int64 {
	t.Helper()
	d, err := OpenDiagnostics(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n, err := d.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenDiagnostics_UnusableFile_SetAsideOldBytesKeptFreshOneCreated(t *testing.T) {
	fresh := freshDiagnosticsSize(t)
	type result struct{ target string } // what the set-aside entry must still be
	cases := map[string]struct {
		setup    func(t *testing.T, path string) result
		ceiling  int64
		sentinel error
		fragment string
	}{
		"garbage": {func(t *testing.T, path string) result {
			if err := os.WriteFile(path, bytes.Repeat([]byte{0xa5}, 32<<10), 0o600); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrCorrupt, "is not a valid bbolt database"},
		"truncated": {func(t *testing.T, path string) result {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrCorrupt, "is truncated"},
		"mode 0640": {func(t *testing.T, path string) result {
			if err := os.Chmod(path, 0o640); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrUnsafeFile, "has mode 0640, want 0600"},
		"symlink": {func(t *testing.T, path string) result {
			real := filepath.Join(t.TempDir(), "elsewhere.db")
			if err := os.Rename(path, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, path); err != nil {
				t.Fatal(err)
			}
			return result{target: real}
		}, 0, ErrUnsafeFile, "is a symlink"},
		"hard linked": {func(t *testing.T, path string) result {
			if err := os.Link(path, filepath.Join(t.TempDir(), "other-name.db")); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrUnsafeFile, "has 2 hard links"},
		"directory": {func(t *testing.T, path string) result {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrUnsafeFile, "is not a regular file"},
		"over ceiling": {func(t *testing.T, path string) result { return result{} }, fresh, ErrTooLarge, fmt.Sprintf("over the configured ceiling of %d bytes", fresh)},
		"newer schema": {func(t *testing.T, path string) result {
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchemaVersion, []byte("9")) }); err != nil {
				t.Fatal(err)
			}
			return result{}
		}, 0, ErrNewerSchema, "has schema version 9"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := OpenDiagnostics(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			// Enough to grow the file past a fresh one's size.
			big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
			for i := 0; i < 4; i++ {
				if err := d.Put("a", time.Now(), big); err != nil {
					t.Fatal(err)
				}
			}
			d.Close()
			path := filepath.Join(dir, diagnosticsFileName)
			res := c.setup(t, path)
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			var oldBytes []byte
			if before.Mode().IsRegular() {
				oldBytes, _ = os.ReadFile(path)
			}
			var targetBytes []byte
			if res.target != "" {
				targetBytes, _ = os.ReadFile(res.target)
			}

			d, err = OpenDiagnostics(Options{Dir: dir, MaxFileBytes: c.ceiling})
			if err != nil {
				t.Fatalf("OpenDiagnostics: %v", err)
			}
			defer d.Close()
			aside, ok := d.SetAside()
			if !ok {
				t.Fatal("SetAside() reports nothing")
			}
			t.Logf("set aside: %s (%s)", aside.Path, aside.Reason)
			if !errors.Is(aside.Err, c.sentinel) || !strings.Contains(aside.Reason, c.fragment) || !strings.Contains(aside.Reason, path) || strings.Contains(aside.Reason, "refusing") {
				t.Errorf("set aside for %q (%v), want %v naming %s", aside.Reason, aside.Err, c.sentinel, c.fragment)
			}
			if msg := aside.OperatorMessage(); strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, aside.Path) || !strings.Contains(msg, aside.Reason) {
				t.Errorf("operator message %q", msg)
			}
			if filepath.Dir(aside.Path) != dir || !strings.HasPrefix(filepath.Base(aside.Path), diagnosticsFileName+".set-aside-") {
				t.Errorf("set-aside path %s", aside.Path)
			}
			// The old entry itself, renamed: same inode, bytes, mode, link target.
			after, err := os.Lstat(aside.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Errorf("set-aside entry is not the old one: %v (%v), was %v", after.Mode(), os.SameFile(before, after), before.Mode())
			}
			if oldBytes != nil {
				if got, _ := os.ReadFile(aside.Path); !bytes.Equal(got, oldBytes) {
					t.Errorf("set-aside file's bytes changed")
				}
			}
			if res.target != "" {
				if link, _ := os.Readlink(aside.Path); link != res.target {
					t.Errorf("set-aside symlink points to %q, want %q", link, res.target)
				}
				if got, _ := os.ReadFile(res.target); !bytes.Equal(got, targetBytes) {
					t.Errorf("symlink target was written through")
				}
			}
			// A fresh, empty, 0600 diagnostics.db took its place and works.
			fi, err := os.Lstat(path)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || os.SameFile(fi, before) {
				t.Fatalf("new diagnostics.db: %v, %v", fi, err)
			}
			if _, found, err := d.Latest("a"); err != nil || found {
				t.Errorf("fresh diagnostics.db has old captures: %v %v", found, err)
			}
			if err := d.Put("b", time.Now(), json.RawMessage(`{"x":1}`)); err != nil {
				t.Fatal(err)
			}
			d.Close()
			// The next open finds nothing to set aside.
			d2, err := OpenDiagnostics(Options{Dir: dir, MaxFileBytes: c.ceiling})
			if err != nil {
				t.Fatal(err)
			}
			defer d2.Close()
			if a, ok := d2.SetAside(); ok {
				t.Errorf("second open set aside %+v", a)
			}
			if _, found, _ := d2.Latest("b"); !found {
				t.Error("capture written after the set-aside is gone")
			}
		})
	}
}

func TestOpenDiagnostics_TwoSetAsidesAtTheSameInstant_DistinctNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, diagnosticsFileName)
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var asides []string
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(path, []byte(fmt.Sprintf("garbage %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDiagnostics(Options{Dir: dir, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		a, ok := d.SetAside()
		d.Close()
		if !ok {
			t.Fatal("not set aside")
		}
		if err := os.Remove(path); err != nil { // make the next round's garbage
			t.Fatal(err)
		}
		asides = append(asides, a.Path)
	}
	for i, p := range asides {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != fmt.Sprintf("garbage %d", i) {
			t.Errorf("%s = %q, %v", p, got, err)
		}
	}
	if asides[0] != path+".set-aside-20250601T120000.000000000Z" || asides[1] != asides[0]+"-1" || asides[2] != asides[0]+"-2" {
		t.Errorf("names %v", asides)
	}
}

func TestOpenDiagnostics_CannotSetAside_ErrorAndFileUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, diagnosticsFileName)
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	makeReadOnlyDir(t, dir)
	d, err := OpenDiagnostics(Options{Dir: dir})
	if err == nil {
		d.Close()
		t.Fatal("OpenDiagnostics succeeded in a directory it cannot write")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "setting it aside failed") || !strings.Contains(err.Error(), "is not a valid bbolt database") || strings.ContainsAny(err.Error(), "\r\n") {
		t.Errorf("error %q", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, bytes.Repeat([]byte{1}, 16<<10)) {
		t.Error("file changed")
	}
}

// makeReadOnlyDir makes dir refuse new entries and renames, even for root
// (chattr +i), undoing it at cleanup; it skips the test when it cannot.
func makeReadOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make %s read-only as root: chattr: %v %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}

func TestOpenDiagnostics_LockedByAnotherProcess_ErrorNotSetAside(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDiagnostics(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	path := filepath.Join(dir, diagnosticsFileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pinned := pinFiles(t, dir)
	_, err = OpenDiagnostics(Options{Dir: dir})
	assertRefusal(t, err, ErrLocked, "diagnostics.db "+path, "is locked by another process")
	assertUntouched(t, dir, pinned)
}

func TestOpenDiagnostics_DiagnosticsFileOption(t *testing.T) {
	dataDir := t.TempDir()
	custom := filepath.Join(t.TempDir(), "sub", "diag.bolt") // parent absent: created 0700
	d, err := OpenDiagnostics(Options{Dir: dataDir, DiagnosticsFile: custom})
	if err != nil {
		t.Fatal(err)
	}
	if d.Path() != custom {
		t.Errorf("Path() = %s", d.Path())
	}
	if err := d.Put("a", time.Now(), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Lstat(filepath.Join(dataDir, diagnosticsFileName)); !os.IsNotExist(err) {
		t.Errorf("default diagnostics.db created too: %v", err)
	}
	if fi, err := os.Lstat(filepath.Dir(custom)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("parent dir: %v, %v", fi, err)
	}
	// A damaged custom file is set aside next to itself.
	if err := os.WriteFile(custom, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err = OpenDiagnostics(Options{DiagnosticsFile: custom})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if a, ok := d.SetAside(); !ok || !strings.HasPrefix(a.Path, custom+".set-aside-") {
		t.Errorf("set aside %+v, %v", a, ok)
	}
	for _, bad := range []string{"diag.db", "./diag.db", "/var/lib/../diag.db", "/var/lib/diag/"} {
		if _, err := OpenDiagnostics(Options{Dir: dataDir, DiagnosticsFile: bad}); err == nil || !strings.Contains(err.Error(), "not a clean absolute file path") {
			t.Errorf("DiagnosticsFile %q: %v", bad, err)
		}
	}
}

func TestDiagnosticsPrune_ManyLeasesAcrossBatches_KeepsYoungAndMalformedRows(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDiagnostics(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cutoff := t0.Add(time.Hour)
	const leases, old, young = 30, 500, 3 // 15000 expired rows: more than one batch
	err = d.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketDiagLeases)
		for l := 0; l < leases; l++ {
			lb, err := root.CreateBucket([]byte(fmt.Sprintf("lease-%02d", l)))
			if err != nil {
				return err
			}
			for i := 0; i < old; i++ {
				if err := lb.Put(diagKey(t0.Add(time.Duration(i)*time.Second), uint64(i)), []byte(`{}`)); err != nil {
					return err
				}
			}
			for i := 0; i < young; i++ {
				if err := lb.Put(diagKey(cutoff.Add(time.Duration(i)*time.Second), uint64(old+i)), []byte(`{"young":true}`)); err != nil {
					return err
				}
			}
		}
		// A lease with only expired rows, and one whose first key is malformed.
		gone, err := root.CreateBucket([]byte("expired-only"))
		if err != nil {
			return err
		}
		if err := gone.Put(diagKey(t0, 1), []byte(`{}`)); err != nil {
			return err
		}
		odd, err := root.CreateBucket([]byte("odd"))
		if err != nil {
			return err
		}
		if err := odd.Put([]byte{0}, []byte(`"malformed"`)); err != nil {
			return err
		}
		return odd.Put(diagKey(t0, 1), []byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if leases*old+2 <= pruneBatch {
		t.Fatalf("test does not cross a batch boundary")
	}
	n, err := d.Prune(cutoff)
	if err != nil || n != leases*old+2 {
		t.Fatalf("Prune = %d, %v; want %d", n, err, leases*old+2)
	}
	err = d.db.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketDiagLeases)
		if root.Bucket([]byte("expired-only")) != nil {
			return fmt.Errorf("empty lease not dropped")
		}
		odd := root.Bucket([]byte("odd"))
		if odd == nil || odd.Get([]byte{0}) == nil || odd.Stats().KeyN != 1 {
			return fmt.Errorf("malformed row not kept alone in lease odd")
		}
		for l := 0; l < leases; l++ {
			if got := root.Bucket([]byte(fmt.Sprintf("lease-%02d", l))).Stats().KeyN; got != young {
				return fmt.Errorf("lease-%02d keeps %d rows, want %d", l, got, young)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.Prune(cutoff); err != nil || n != 0 {
		t.Fatalf("second Prune = %d, %v", n, err)
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
