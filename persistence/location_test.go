package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// copyDataDir copies a stopped data dir's state.db and marker to dst, as an
// operator's cp -a would (mode 0600 kept).
func copyDataDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stateFileName, markerFileName} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// metaOf reads state.db's meta bucket directly.
func metaOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := bolt.Open(statePathOf(dir), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// editMeta changes state.db's meta bucket directly, behind the package's back.
func editMeta(t *testing.T, dir string, fn func(meta *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(statePathOf(dir), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketMeta)) }); err != nil {
		t.Fatal(err)
	}
}

func resolved(t *testing.T, dir string) string {
	t.Helper()
	loc, err := resolveLocation(dir)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// openOK opens dir and closes the store at the end of the test.
func openOK(t *testing.T, opts Options) (*Store, OpenInfo) {
	t.Helper()
	s, info, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.Dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, info
}

// assertMarkerIs checks that the marker on disk carries id.
func assertMarkerIs(t *testing.T, dir string, id Identity) {
	t.Helper()
	m, err := readMarker(markerPathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	if m.StorageID != id.StorageID || m.InstallationID != id.InstallationID || !m.CreatedAt.Equal(id.CreatedAt) {
		t.Fatalf("marker in %s = %+v, want %+v", dir, m, id)
	}
}

func TestOpen_NewStore_RecordsItsResolvedLocation(t *testing.T) {
	dir := t.TempDir()
	s, info := openOK(t, Options{Dir: dir})
	if !info.Initialized || info.Rekey != nil || info.LocationBound {
		t.Fatalf("info = %+v", info)
	}
	if got := metaOf2(t, s)[string(metaLocation)]; got != resolved(t, dir) || got != info.Location || got != s.Location() {
		t.Fatalf("meta location %q, info %q, store %q; want %q", got, info.Location, s.Location(), resolved(t, dir))
	}
	if _, ok := s.LastRekey(); ok {
		t.Fatal("a new store reports a re-key")
	}

	// InitializeIdentity records it too.
	dir2 := t.TempDir()
	if _, err := InitializeIdentity(Options{Dir: dir2, ProductionMode: true}); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, dir2)[string(metaLocation)]; got != resolved(t, dir2) {
		t.Fatalf("initialised store records %q, want %q", got, resolved(t, dir2))
	}
}

func TestOpen_CopiedDataDir_CopyRekeyedOriginalKeepsItsID_SecondOpenOfCopyKeepsNewID(t *testing.T) {
	orig := populatedDir(t)
	before := metaOf(t, orig)
	oldID := before[string(metaInstallationID)]
	copyDir := filepath.Join(t.TempDir(), "copy")
	copyDataDir(t, orig, copyDir)

	// Production mode re-keys too: it never creates an identity, but this one exists.
	s, info := openOK(t, Options{Dir: copyDir, ProductionMode: true})
	id := s.Identity()
	r := info.Rekey
	if r == nil {
		t.Fatal("open of a copy did not re-key")
	}
	if r.OldInstallationID != oldID || r.NewInstallationID != id.InstallationID || id.InstallationID == oldID || !validUUIDv4(id.InstallationID) {
		t.Fatalf("rekey %+v, identity %+v, old id %s", r, id, oldID)
	}
	if r.OldLocation != resolved(t, orig) || r.NewLocation != resolved(t, copyDir) || r.Resumed || r.StorageID != id.StorageID || r.At.IsZero() {
		t.Fatalf("rekey = %+v", r)
	}
	if id.StorageID != before[string(metaStorageID)] {
		t.Fatalf("storage_id changed: %s → %s", before[string(metaStorageID)], id.StorageID)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check after re-key: %v", err)
	}
	if lr, ok := s.LastRekey(); !ok || lr != *r {
		t.Fatalf("LastRekey = %+v, %v", lr, ok)
	}
	msg := r.OperatorMessage()
	for _, want := range []string{oldID, id.InstallationID, r.OldLocation, r.NewLocation, "fred.installation_id=" + oldID, "docker rm", "without -v", "volumes are kept"} {
		if !strings.Contains(msg, want) {
			t.Errorf("operator message %q lacks %q", msg, want)
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("operator message is not one line")
	}
	assertMarkerIs(t, copyDir, id)
	m := metaOf2(t, s)
	if m[string(metaPreviousInstallationID)] != oldID || m[string(metaPreviousLocation)] != resolved(t, orig) || m[string(metaLocation)] != resolved(t, copyDir) {
		t.Fatalf("meta after re-key = %v", m)
	}
	// The journal came along untouched.
	if l, err := s.Load("lease/007"); err != nil || len(l.Events) == 0 {
		t.Fatalf("Load after re-key: %d events, %v", len(l.Events), err)
	}
	s.Close()

	// The original is where it was claimed: same identity, nothing written.
	pinned := pinFiles(t, orig)
	so, info := openOK(t, Options{Dir: orig, ProductionMode: true})
	if info.Rekey != nil || info.LocationBound || so.Identity().InstallationID != oldID {
		t.Fatalf("original: info %+v identity %+v", info, so.Identity())
	}
	so.Close()
	assertUntouched(t, orig, pinned)

	// The copy's second open keeps the identity the first one chose.
	s2, info := openOK(t, Options{Dir: copyDir})
	if info.Rekey != nil || s2.Identity() != id {
		t.Fatalf("second open of the copy: info %+v identity %+v, want %+v", info, s2.Identity(), id)
	}
	if lr, ok := s2.LastRekey(); !ok || lr.OldInstallationID != oldID || lr.NewInstallationID != id.InstallationID || lr.Resumed {
		t.Fatalf("LastRekey after reopen = %+v, %v", lr, ok)
	}
}

func TestOpen_MovedDataDir_Rekeyed(t *testing.T) {
	orig := populatedDir(t)
	oldID := metaOf(t, orig)[string(metaInstallationID)]
	oldLoc := resolved(t, orig)
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(orig, moved); err != nil {
		t.Fatal(err)
	}
	s, info := openOK(t, Options{Dir: moved})
	r := info.Rekey
	if r == nil || r.OldInstallationID != oldID || s.Identity().InstallationID == oldID || r.NewInstallationID != s.Identity().InstallationID ||
		r.OldLocation != oldLoc || r.NewLocation != resolved(t, moved) {
		t.Fatalf("moved dir: rekey %+v identity %+v", r, s.Identity())
	}
	assertMarkerIs(t, moved, s.Identity())
}

func TestOpen_CrashBetweenRekeyCommitAndMarkerRewrite_NextOpenCompletesIt(t *testing.T) {
	orig := populatedDir(t)
	oldMarker, err := os.ReadFile(markerPathOf(orig))
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(t.TempDir(), "copy")
	copyDataDir(t, orig, copyDir)
	s, info := openOK(t, Options{Dir: copyDir})
	if info.Rekey == nil {
		t.Fatal("no re-key")
	}
	want := s.Identity()
	s.Close()
	// The crash: meta committed, the marker never rewritten.
	if err := os.WriteFile(markerPathOf(copyDir), oldMarker, 0o600); err != nil {
		t.Fatal(err)
	}

	s2, info := openOK(t, Options{Dir: copyDir, ProductionMode: true})
	r := info.Rekey
	if r == nil || !r.Resumed || r.NewInstallationID != want.InstallationID || r.OldInstallationID != metaOf(t, orig)[string(metaInstallationID)] ||
		r.OldLocation != resolved(t, orig) || r.NewLocation != resolved(t, copyDir) {
		t.Fatalf("resumed open: rekey %+v", r)
	}
	if s2.Identity() != want {
		t.Fatalf("identity %+v, want the committed %+v (no second re-key)", s2.Identity(), want)
	}
	assertMarkerIs(t, copyDir, want)
	if err := s2.Check(); err != nil {
		t.Fatal(err)
	}
	s2.Close()

	// Any other mismatch is still refused: the same crash state, moved elsewhere.
	if err := os.WriteFile(markerPathOf(copyDir), oldMarker, 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Rename(copyDir, elsewhere); err != nil {
		t.Fatal(err)
	}
	openRefused(t, Options{Dir: elsewhere}, ErrForeign, "state.db "+statePathOf(elsewhere)+" has installation_id "+want.InstallationID, "belong to different installations")
}

func TestOpen_MalformedLocationRecord_RefusedFilesUntouched(t *testing.T) {
	put := func(key []byte, val string) func(*bolt.Bucket) error {
		return func(m *bolt.Bucket) error { return m.Put(key, []byte(val)) }
	}
	rekeyRecord := func(prevID, prevLoc, at string) func(*bolt.Bucket) error {
		return func(m *bolt.Bucket) error {
			for k, v := range map[string]string{string(metaPreviousInstallationID): prevID, string(metaPreviousLocation): prevLoc, string(metaRekeyedAt): at} {
				if err := m.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	okAt := time.Now().UTC().Format(time.RFC3339Nano)
	cases := map[string]struct {
		edit     func(*bolt.Bucket) error
		fragment string
	}{
		"empty location":    {put(metaLocation, ""), "malformed meta.installation_location \"\" (it is empty)"},
		"relative location": {put(metaLocation, "var/lib/berth"), "(it is not an absolute path)"},
		"unclean location":  {put(metaLocation, "/var/lib/../berth"), "(it is not a clean path)"},
		"NUL in location":   {put(metaLocation, "/var/lib/\x00berth"), "(it contains NUL)"},
		"overlong location": {put(metaLocation, "/"+strings.Repeat("a", 5000)), "limit 4096"},
		"location is bucket": {func(m *bolt.Bucket) error {
			_ = m.Delete(metaLocation)
			_, err := m.CreateBucket(metaLocation)
			return err
		}, "has a bucket where meta.installation_location belongs"},
		"installation id not v4":     {put(metaInstallationID, uuid.NewMD5(uuid.NameSpaceDNS, []byte("x")).String()), "is not a canonical UUIDv4"},
		"installation id upper":      {put(metaInstallationID, strings.ToUpper(uuid.NewString())), "is not a canonical UUIDv4"},
		"installation id empty":      {put(metaInstallationID, ""), "installation_id \"\" is not a canonical UUIDv4"},
		"previous id malformed":      {rekeyRecord("not-a-uuid", "/old", okAt), "malformed meta.previous_installation_id \"not-a-uuid\""},
		"previous location relative": {rekeyRecord(uuid.NewString(), "old", okAt), "malformed meta.previous_installation_location \"old\""},
		"rekeyed_at malformed":       {rekeyRecord(uuid.NewString(), "/old", "yesterday"), "malformed meta.installation_rekeyed_at"},
		"incomplete re-key record":   {put(metaPreviousInstallationID, uuid.NewString()), "incomplete re-key record"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			orig := populatedDir(t)
			// A copy: were the record taken as "another location", this would re-key.
			dir := filepath.Join(t.TempDir(), "copy")
			copyDataDir(t, orig, dir)
			editMeta(t, dir, c.edit)
			// The marker stays valid: a malformed meta value must be refused as such,
			// never read as a mismatch with it.
			for _, prod := range []bool{false, true} {
				openRefused(t, Options{Dir: dir, ProductionMode: prod}, ErrCorrupt, "state.db "+statePathOf(dir), c.fragment, "(file left untouched)")
			}
		})
	}
}

func TestOpen_SymlinkedDataDirPath_SameIdentitySameLock(t *testing.T) {
	real := populatedDir(t)
	pinned := pinFiles(t, real)
	link := filepath.Join(t.TempDir(), "data")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	id := metaOf(t, real)[string(metaInstallationID)]
	s, info := openOK(t, Options{Dir: link, ProductionMode: true})
	if info.Rekey != nil || info.LocationBound || s.Identity().InstallationID != id || info.Location != resolved(t, real) {
		t.Fatalf("via symlink: info %+v identity %+v", info, s.Identity())
	}
	s.Close()
	assertUntouched(t, real, pinned)

	// A symlink to a live data dir meets its lock.
	l, err := AcquireLock(real)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := AcquireLock(link); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock via symlink while the real dir is locked: %v", err)
	}
}

func TestOpen_StoreFromEarlierBerthdWithoutLocation_BoundOnceIdentityKept(t *testing.T) {
	for _, prod := range []bool{false, true} {
		dir := populatedDir(t)
		editMeta(t, dir, func(m *bolt.Bucket) error { return m.Delete(metaLocation) })
		id := metaOf(t, dir)[string(metaInstallationID)]
		s, info := openOK(t, Options{Dir: dir, ProductionMode: prod})
		if !info.LocationBound || info.Rekey != nil || s.Identity().InstallationID != id {
			t.Fatalf("production=%v: info %+v identity %+v", prod, info, s.Identity())
		}
		if got := metaOf2(t, s)[string(metaLocation)]; got != resolved(t, dir) {
			t.Fatalf("bound location %q, want %q", got, resolved(t, dir))
		}
		s.Close()
		pinned := pinFiles(t, dir)
		s, info = openOK(t, Options{Dir: dir, ProductionMode: prod})
		if info.LocationBound || info.Rekey != nil || s.Identity().InstallationID != id {
			t.Fatalf("second open: info %+v", info)
		}
		s.Close()
		assertUntouched(t, dir, pinned)
	}
}

// metaOf2 reads meta through an open store.
func metaOf2(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpen_ConcurrentStartsOfOneCopy_SettleOnOneIdentity(t *testing.T) {
	orig := populatedDir(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	copyDataDir(t, orig, copyDir)
	const starts = 6
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ids    = map[string]int{}
		rekeys int
	)
	for i := 0; i < starts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each start behaves like berthd: take daemon.lock (wait for it), then open.
			var l *Lock
			for {
				var err error
				if l, err = AcquireLock(copyDir); err == nil {
					break
				} else if !errors.Is(err, ErrLocked) {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
			defer l.Release()
			s, info, err := Open(Options{Dir: copyDir})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			mu.Lock()
			ids[s.Identity().InstallationID]++
			if info.Rekey != nil {
				rekeys++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(ids) != 1 || rekeys != 1 {
		t.Fatalf("%d starts saw identities %v and %d re-keys; want one identity, one re-key", starts, ids, rekeys)
	}
}

func TestOpen_RekeyLosesCompareAndSwap_SettlesOnWinnersIdentity(t *testing.T) {
	orig := populatedDir(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	copyDataDir(t, orig, copyDir)
	var winner Identity
	hookRan := 0
	opts := Options{Dir: copyDir, beforeIdentityWrite: func() {
		// Another start of the same copy re-keys it between this open's validation
		// and its compare-and-swap.
		hookRan++
		s, info, err := Open(Options{Dir: copyDir})
		if err != nil {
			t.Errorf("winner: %v", err)
			return
		}
		if info.Rekey == nil {
			t.Error("winner did not re-key")
		}
		winner = s.Identity()
		s.Close()
	}}
	s, info := openOK(t, opts)
	if hookRan != 1 {
		t.Fatalf("hook ran %d times", hookRan)
	}
	if info.Rekey != nil || s.Identity() != winner {
		t.Fatalf("loser: rekey %+v identity %+v, want no re-key and the winner's %+v", info.Rekey, s.Identity(), winner)
	}
	assertMarkerIs(t, copyDir, winner)
}

func TestOpen_IdentityKeepsChangingUnderOpen_RefusedAfterBoundedRetries(t *testing.T) {
	orig := populatedDir(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	copyDataDir(t, orig, copyDir)
	n := 0
	_, _, err := Open(Options{Dir: copyDir, beforeIdentityWrite: func() {
		n++
		editMeta(t, copyDir, func(m *bolt.Bucket) error { return m.Put(metaLocation, []byte("/somewhere/else/"+uuid.NewString())) })
	}})
	assertRefusal(t, err, ErrLocked, "its installation identity changed under this open 3 times in a row")
	if n != maxOpenAttempts {
		t.Fatalf("%d attempts, want %d", n, maxOpenAttempts)
	}
	// Whatever the interference left, no re-key committed: the id is the original's.
	if got, want := metaOf(t, copyDir)[string(metaInstallationID)], metaOf(t, orig)[string(metaInstallationID)]; got != want {
		t.Fatalf("installation_id %s, want the untouched %s", got, want)
	}
}
