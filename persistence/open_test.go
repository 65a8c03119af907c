package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// populatedDir creates a store with enough journal and outbox data to span many
// pages, closes it and returns its directory.
func populatedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Twenty commits of ten events and ten outbox rows: ~60 KiB over many pages.
	payload := strings.Repeat("x", 300)
	for c := 0; c < 20; c++ {
		var w Write
		for i := c * 10; i < c*10+10; i++ {
			w.Appends = append(w.Appends, Append{Stream: fmt.Sprintf("lease/%03d", i%20), Events: []Event{ev("Step", map[string]any{"i": i, "pad": payload})}})
			w.Outbox = append(w.Outbox, row(fmt.Sprintf("lease-%d", i%7), fmt.Sprint(i), s.opts.Now()))
		}
		if _, err := s.Commit(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func statePathOf(dir string) string  { return filepath.Join(dir, stateFileName) }
func markerPathOf(dir string) string { return filepath.Join(dir, markerFileName) }

// openRefused opens dir expecting a refusal, and checks that nothing in dir changed.
func openRefused(t *testing.T, opts Options, sentinel error, fragments ...string) {
	t.Helper()
	pinned := pinFiles(t, opts.Dir)
	s, _, err := Open(opts)
	if err == nil {
		s.Close()
	}
	assertRefusal(t, err, sentinel, fragments...)
	assertUntouched(t, opts.Dir, pinned)
}

func TestOpen_CorruptStateDB_GarbageBytes_RefusedAndFileUntouched(t *testing.T) {
	dir := populatedDir(t)
	garbage := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.UintN(256))
	}
	if err := os.WriteFile(statePathOf(dir), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrCorrupt, statePathOf(dir), "is not a valid bbolt database", "refusing to start")
}

func TestOpen_TruncatedStateDB_HalfCut_RefusedAndFileUntouched(t *testing.T) {
	dir := populatedDir(t)
	data, err := os.ReadFile(statePathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(statePathOf(dir), int64(len(data)/2)); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrCorrupt,
		fmt.Sprintf("state.db %s is truncated: %d bytes on disk but its meta page says", statePathOf(dir), len(data)/2))
}

func TestOpen_TruncatedStateDB_SizeZero_RefusedAndFileUntouched(t *testing.T) {
	dir := populatedDir(t)
	if err := os.Truncate(statePathOf(dir), 0); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrCorrupt,
		fmt.Sprintf("state.db %s is truncated: 0 bytes, smaller than two bbolt pages; refusing to start (file left untouched)", statePathOf(dir)))
}

func TestOpen_DamagedTreePages_RefusedNotCrashed(t *testing.T) {
	// Valid meta pages over damaged B+tree pages: bbolt either panics, faults or
	// reports a Check error; every way must end as ErrCorrupt, never a crash.
	// Odd seeds overwrite whole pages; even seeds keep the 16-byte page header (id,
	// type, count) and scramble the element table and data behind it.
	for seed := uint64(1); seed <= 16; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			dir := populatedDir(t)
			path := statePathOf(dir)
			inUse := treePages(t, path)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			page := os.Getpagesize()
			r := rand.New(rand.NewPCG(seed, 99))
			for n := 1 + r.IntN(3); n > 0; n-- {
				p := inUse[r.IntN(len(inUse))]
				from := 0
				if seed%2 == 0 {
					from = 16
				}
				for i := from; i < page; i++ {
					data[p*page+i] = byte(r.UintN(256))
				}
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			pinned := pinFiles(t, dir)
			s, _, err := Open(Options{Dir: dir})
			if err == nil {
				s.Close()
			}
			assertRefusal(t, err, ErrCorrupt, "state.db "+path, "refusing to start (file left untouched)")
			assertUntouched(t, dir, pinned)
		})
	}
}

// treePages lists the branch and leaf pages a db is using.
func treePages(t *testing.T, path string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				return nil
			}
			if info.Type == "leaf" || info.Type == "branch" {
				ids = append(ids, id)
			}
		}
	})
	if err != nil || len(ids) == 0 {
		t.Fatalf("tree pages: %v, %v", ids, err)
	}
	return ids
}

func TestOpen_NewerSchema_Refused(t *testing.T) {
	dir := populatedDir(t)
	db, err := bolt.Open(statePathOf(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchemaVersion, []byte("2")) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrNewerSchema,
		fmt.Sprintf("state.db %s has schema version 2, newer than this berthd supports (1); refusing to start (file left untouched)", statePathOf(dir)))
}

func TestOpen_MarkerOfAnotherInstallation_RefusedAndFilesUntouched(t *testing.T) {
	dir := populatedDir(t)
	other := t.TempDir()
	if _, err := InitializeIdentity(Options{Dir: other}); err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(markerPathOf(other))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(markerPathOf(dir), foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	var id Identity
	if err := json.Unmarshal(foreign, &id); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir, ProductionMode: true}, ErrForeign,
		statePathOf(dir), "storage_id", "but marker "+markerPathOf(dir)+" says "+id.StorageID, "belong to different installations")
}

func TestOpen_StateWithoutMarker_RefusedNotReinitialised(t *testing.T) {
	dir := populatedDir(t)
	if err := os.Remove(markerPathOf(dir)); err != nil {
		t.Fatal(err)
	}
	// Neither mode may adopt or re-initialise it.
	for _, prod := range []bool{false, true} {
		openRefused(t, Options{Dir: dir, ProductionMode: prod}, ErrForeign,
			fmt.Sprintf("state.db %s exists but storage identity marker %s is missing", statePathOf(dir), markerPathOf(dir)))
	}
}

func TestOpen_MarkerWithoutState_Refused(t *testing.T) {
	dir := populatedDir(t)
	if err := os.Remove(statePathOf(dir)); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrForeign,
		fmt.Sprintf("storage identity marker %s exists but state.db %s is missing", markerPathOf(dir), statePathOf(dir)))
}

func TestOpen_SymlinkedStateDB_Refused(t *testing.T) {
	dir := populatedDir(t)
	real := filepath.Join(dir, "state.real")
	if err := os.Rename(statePathOf(dir), real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, statePathOf(dir)); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrUnsafeFile,
		fmt.Sprintf("state.db %s is a symlink; refusing to follow it (file left untouched)", statePathOf(dir)))
}

func TestOpen_SymlinkedMarker_Refused(t *testing.T) {
	dir := populatedDir(t)
	real := filepath.Join(dir, "marker.real")
	if err := os.Rename(markerPathOf(dir), real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, markerPathOf(dir)); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrUnsafeFile, "storage identity marker "+markerPathOf(dir)+" is a symlink")
}

func TestOpen_StateDBMode0644_Refused(t *testing.T) {
	dir := populatedDir(t)
	if err := os.Chmod(statePathOf(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrUnsafeFile,
		fmt.Sprintf("state.db %s has mode 0644, want 0600; refusing it (file left untouched)", statePathOf(dir)))
}

func TestOpen_StateDBHardLinked_Refused(t *testing.T) {
	dir := populatedDir(t)
	if err := os.Link(statePathOf(dir), filepath.Join(dir, "state.copy")); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrUnsafeFile, "has 2 hard links, want exactly 1")
}

func TestOpen_StateDBOverCeiling_Refused(t *testing.T) {
	dir := populatedDir(t)
	fi, err := os.Stat(statePathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	ceiling := fi.Size() - 1
	openRefused(t, Options{Dir: dir, MaxFileBytes: ceiling}, ErrTooLarge,
		fmt.Sprintf("state.db %s is %d bytes, over the configured ceiling of %d bytes; refusing it (file left untouched)", statePathOf(dir), fi.Size(), ceiling))
}

func TestOpen_MarkerNotJSON_Refused(t *testing.T) {
	dir := populatedDir(t)
	if err := os.WriteFile(markerPathOf(dir), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: dir}, ErrCorrupt, "storage identity marker "+markerPathOf(dir)+" is not valid JSON")
}

func TestOpen_ProductionWithoutMarker_RefusedNothingCreated(t *testing.T) {
	dir := t.TempDir()
	openRefused(t, Options{Dir: dir, ProductionMode: true}, ErrNoIdentity,
		fmt.Sprintf("%s has no storage identity (storage-identity) and production mode never creates one implicitly; run berthd -initialize-storage-identity new", dir))
}

func TestOpen_NonProductionEmptyDir_InitialisesOnceThenReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // absent: created 0700
	s, info, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Initialized {
		t.Fatal("Initialized = false on an empty dir")
	}
	id := s.Identity()
	if !validUUIDv4(id.StorageID) || !validUUIDv4(id.InstallationID) || id.StorageID == id.InstallationID || id.CreatedAt.IsZero() {
		t.Fatalf("identity = %+v", id)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	s.Close()
	for path, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, statePathOf(dir): 0o600, markerPathOf(dir): 0o600} {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want state.db and the marker only (no temp files)", len(entries))
	}
	marker, err := readMarker(markerPathOf(dir))
	if err != nil || marker.StorageID != id.StorageID || marker.InstallationID != id.InstallationID || !marker.CreatedAt.Equal(id.CreatedAt) {
		t.Fatalf("marker = %+v, %v; want %+v", marker, err, id)
	}

	// Production mode now accepts it, and does not initialise again.
	s2, info, err := Open(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if info.Initialized || s2.Identity().StorageID != id.StorageID {
		t.Fatalf("second open: initialized=%v id=%+v", info.Initialized, s2.Identity())
	}
}

func TestInitializeIdentity_NewThenProductionOpen_AndRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	id, err := InitializeIdentity(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatal(err)
	}
	s, info, err := Open(Options{Dir: dir, ProductionMode: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Initialized || s.Identity().StorageID != id.StorageID || s.Identity().InstallationID != id.InstallationID {
		t.Fatalf("open after initialise: %+v %+v", info, s.Identity())
	}
	s.Close()

	pinned := pinFiles(t, dir)
	_, err = InitializeIdentity(Options{Dir: dir, ProductionMode: true})
	assertRefusal(t, err, ErrIdentityExists, markerPathOf(dir)+" already exists")
	assertUntouched(t, dir, pinned)

	// A lone state.db also blocks initialisation (it may own containers).
	if err := os.Remove(markerPathOf(dir)); err != nil {
		t.Fatal(err)
	}
	_, err = InitializeIdentity(Options{Dir: dir})
	assertRefusal(t, err, ErrIdentityExists, statePathOf(dir)+" already exists")
}

func TestOpen_StateDBLockedByForeignProcess_ErrLocked(t *testing.T) {
	dir := populatedDir(t)
	// Another bbolt writer holds state.db (not a berthd: no daemon.lock involved).
	db, err := bolt.Open(statePathOf(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, _, err = Open(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "is locked by another process") {
		t.Fatalf("Open = %v", err)
	}
}

func TestInitializeIdentityWith_TheFirstWriteIsInTheStoreBeforeItsMarker(t *testing.T) {
	dir := t.TempDir()
	first := Write{Appends: []Append{{Stream: "adoption", Events: []Event{{Type: "adoption.recorded", V: 1, Data: json.RawMessage(`{"n":1}`)}}}},
		Outbox: []OutboxRow{{Lease: "l1", DeliveryID: "d1", URL: "http://cb", Body: json.RawMessage(`{}`), Kind: KindLifecycle}}}
	if _, err := InitializeIdentityWith(Options{Dir: dir}, first); err != nil {
		t.Fatal(err)
	}
	s, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Load("adoption")
	if err != nil || len(got.Events) != 1 || got.Events[0].Type != "adoption.recorded" {
		t.Fatalf("adoption stream: %+v %v", got, err)
	}
	if rows, err := s.OutboxOf("l1"); err != nil || len(rows) != 1 || rows[0].Row.DeliveryID != "d1" {
		t.Fatalf("outbox: %+v %v", rows, err)
	}
	// A bad first write changes nothing: no state.db, no marker.
	bad := t.TempDir()
	if _, err := InitializeIdentityWith(Options{Dir: bad}, Write{Appends: []Append{{Stream: "adoption"}}}); err == nil {
		t.Fatal("an append without events was taken")
	}
	if entries, _ := os.ReadDir(bad); len(entries) > 0 {
		t.Fatalf("a refused initialisation left %v", entries)
	}
}
