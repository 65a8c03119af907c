package persistence

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openReadOnly(t *testing.T, dir string) (*Store, ReadOnlyInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, info, err := OpenReadOnly(ctx, ReadOnlyOptions{Dir: dir, TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	return s, info
}

func TestOpenReadOnly_ReadsACopy_RefusesWrites_LeavesTheDirUntouched(t *testing.T) {
	dir := populatedDir(t)
	pinned := pinFiles(t, dir)
	tmp := t.TempDir()
	s, info, err := OpenReadOnly(context.Background(), ReadOnlyOptions{Dir: dir, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if info.Binding != BindingCurrent || info.Copies != 1 || info.RecordedLocation != info.Location || len(info.Findings) != 0 {
		t.Fatalf("info = %+v", info)
	}
	marker, err := readMarker(markerPathOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	if s.Identity() != marker || s.Path() != statePathOf(dir) {
		t.Fatalf("identity %+v path %s; marker %+v", s.Identity(), s.Path(), marker)
	}
	streams, err := s.Streams("lease/")
	if err != nil || len(streams) != 20 {
		t.Fatalf("Streams: %d, %v", len(streams), err)
	}
	if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/x", Events: []Event{ev("Step", 1)}}}}); !errors.Is(err, errReadOnly) {
		t.Fatalf("Commit on a read-only store: %v", err)
	}
	if s.Err() != nil {
		t.Fatalf("a refused write latched the read-only store: %v", s.Err())
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Fatalf("want one private copy dir in %s, have %d", tmp, len(entries))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("Close left the copy behind: %v", entries)
	}
	assertUntouched(t, dir, pinned)
}

// A daemon's store stays open read-write (bbolt's exclusive flock held) and keeps
// committing: the read-only open neither waits for it nor disturbs it, and what
// it reads is one committed transaction, whole.
func TestOpenReadOnly_NextToAWritingDaemon_ConsistentAndHarmless(t *testing.T) {
	dir := t.TempDir()
	lock, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	live, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// What a plain read-only bbolt open would meet: the daemon's exclusive flock.
	if _, err := inspectBolt(statePathOf(dir), statePathOf(dir), "state.db", 0, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("a read-only bbolt open beside the daemon: %v, want ErrLocked", err)
	}
	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		commits atomic.Int64
		failed  atomic.Value
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		pad := strings.Repeat("p", 2000)
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			// Every commit appends event k to two streams: a consistent snapshot has
			// both at the same length.
			w := Write{Appends: []Append{
				{Stream: "a", Events: []Event{ev("Step", map[string]any{"k": k, "pad": pad})}},
				{Stream: "b", Events: []Event{ev("Step", map[string]any{"k": k})}},
			}}
			if _, err := live.Commit(w); err != nil {
				failed.Store(err)
				return
			}
			commits.Add(1)
		}
	}()
	for i := 0; i < 20; i++ {
		s, _ := openReadOnly(t, dir)
		a, errA := s.Load("a")
		b, errB := s.Load("b")
		if errA != nil || errB != nil || len(a.Events) != len(b.Events) {
			t.Fatalf("snapshot %d: a %d events (%v), b %d events (%v): not one transaction", i, len(a.Events), errA, len(b.Events), errB)
		}
		s.Close()
	}
	close(stop)
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatalf("the daemon's writes failed beside the read-only opens: %v", err)
	}
	if commits.Load() == 0 {
		t.Fatal("the writer never committed")
	}
	if err := live.Check(); err != nil {
		t.Fatalf("daemon store after the read-only opens: %v", err)
	}
}

// A commit that lands while the copy is being made makes that copy torn: it is
// discarded and taken again.
func TestOpenReadOnly_ACommitDuringTheCopy_IsDetectedAndRecopied(t *testing.T) {
	dir := t.TempDir()
	live, _, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	n := 0
	afterCopyHook = func() {
		if n < 2 {
			n++
			if _, err := live.Commit(Write{Appends: []Append{{Stream: "s", Events: []Event{ev("Step", n)}}}}); err != nil {
				t.Errorf("commit: %v", err)
			}
		}
	}
	defer func() { afterCopyHook = nil }()
	s, info := openReadOnly(t, dir)
	defer s.Close()
	if info.Copies != 3 {
		t.Fatalf("copies = %d, want 3 (two torn by a commit, then a clean one)", info.Copies)
	}
	loaded, err := s.Load("s")
	if err != nil || len(loaded.Events) != 2 {
		t.Fatalf("the clean copy has %d events (%v), want both commits", len(loaded.Events), err)
	}

	// A daemon that never stops committing: the open gives up, saying why.
	afterCopyHook = func() {
		_, _ = live.Commit(Write{Appends: []Append{{Stream: "s", Events: []Event{ev("Step", 0)}}}})
	}
	_, _, err = OpenReadOnly(context.Background(), ReadOnlyOptions{Dir: dir, TempDir: t.TempDir(), Attempts: 3})
	if err == nil || !strings.Contains(err.Error(), "during each of 3 copies") {
		t.Fatalf("a copy torn every time: %v", err)
	}
}

// While OpenReadOnly runs over and over, a daemon can still start: no lock of
// any kind stands in its way.
func TestOpenReadOnly_NeverBlocksAStartingDaemon(t *testing.T) {
	dir := populatedDir(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s, _, err := OpenReadOnly(context.Background(), ReadOnlyOptions{Dir: dir, TempDir: os.TempDir()})
			if err == nil {
				s.Close()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := 0; i < 20; i++ {
		lock, err := AcquireLock(dir)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		s, _, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		s.Close()
		lock.Release()
	}
}

func TestOpenReadOnly_Refusals_NameTheLiveFile_AndChangeNothing(t *testing.T) {
	refused := func(t *testing.T, dir string, sentinel error, fragments ...string) {
		t.Helper()
		pinned := pinFiles(t, dir)
		tmp := t.TempDir()
		s, _, err := OpenReadOnly(context.Background(), ReadOnlyOptions{Dir: dir, TempDir: tmp})
		if err == nil {
			s.Close()
		}
		assertRefusal(t, err, sentinel, fragments...)
		if strings.Contains(err.Error(), tmp) {
			t.Errorf("the refusal names the private copy: %v", err)
		}
		assertUntouched(t, dir, pinned)
		if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
			t.Errorf("a refused open left %v in %s", entries, tmp)
		}
	}
	t.Run("mode 0644", func(t *testing.T) {
		dir := populatedDir(t)
		if err := os.Chmod(statePathOf(dir), 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrUnsafeFile, statePathOf(dir), "mode 0644")
	})
	t.Run("marker of another data dir", func(t *testing.T) {
		dir, other := populatedDir(t), populatedDir(t)
		raw, err := os.ReadFile(markerPathOf(other))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(markerPathOf(dir)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(markerPathOf(dir), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrForeign, "different installations")
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := populatedDir(t)
		f, err := os.OpenFile(statePathOf(dir), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 8192), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		refused(t, dir, ErrCorrupt, statePathOf(dir))
	})
	t.Run("no store yet", func(t *testing.T) {
		refused(t, t.TempDir(), ErrNoIdentity, "no storage identity")
	})
	t.Run("symlinked state.db", func(t *testing.T) {
		dir := populatedDir(t)
		moved := filepath.Join(t.TempDir(), "state.db")
		if err := os.Rename(statePathOf(dir), moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, statePathOf(dir)); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrUnsafeFile, "symlink")
	})
}

func TestOpenReadOnly_AMovedDataDir_SaysTheNextStartReKeys(t *testing.T) {
	dir := populatedDir(t)
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	s, info := openReadOnly(t, moved)
	defer s.Close()
	if info.Binding != BindingRekey || info.RecordedLocation == info.Location {
		t.Fatalf("info = %+v, want a re-key", info)
	}
}

func TestReadLockHolder_ThePIDFromTheKernelsLockTable(t *testing.T) {
	dir := t.TempDir()
	h, err := ReadLockHolder(dir)
	if err != nil || h.Held {
		t.Fatalf("no lock file: %+v, %v", h, err)
	}
	lock, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err = ReadLockHolder(dir)
	if err != nil || !h.Held || h.PID != os.Getpid() || h.RecordedPID != os.Getpid() || h.Comm == "" {
		t.Fatalf("held: %+v, %v (pid %d)", h, err, os.Getpid())
	}
	// Reading did not take the lock: another taker is still refused, by the holder.
	if _, err := AcquireLock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second AcquireLock: %v", err)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	h, err = ReadLockHolder(dir)
	if err != nil || h.Held || h.RecordedPID != os.Getpid() {
		t.Fatalf("released: %+v, %v", h, err)
	}
}

func TestFlockHolder_ParsesTheLockTable(t *testing.T) {
	table := []byte(strings.Join([]string{
		"1: POSIX  ADVISORY  WRITE 11 08:01:42 0 EOF",
		"2: FLOCK  ADVISORY  WRITE 22 00:2d:43 0 EOF",
		"2: -> FLOCK  ADVISORY  WRITE 33 08:01:42 0 EOF",
		"3: FLOCK  ADVISORY  WRITE 44 08:01:42 0 EOF",
	}, "\n"))
	for _, c := range []struct {
		dev  string
		ino  uint64
		pid  int
		held bool
	}{
		{"08:01", 42, 44, true}, // the POSIX lock and the waiter are not the holder
		{"00:2d", 43, 22, true},
		{"00:99", 43, 22, true}, // btrfs: stat's device differs from the table's
		{"08:01", 7, 0, false},
	} {
		pid, held := flockHolder(table, c.dev, c.ino)
		if pid != c.pid || held != c.held {
			t.Errorf("flockHolder(%s, %d) = %d, %t; want %d, %t", c.dev, c.ino, pid, held, c.pid, c.held)
		}
	}
}
