package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Helper processes: the test binary re-executes itself with helperEnv set to a mode.
const (
	helperEnv    = "BERTH_PERSISTENCE_TEST_HELPER"
	helperDirEnv = "BERTH_PERSISTENCE_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(helperDirEnv)))
	}
	os.Exit(m.Run())
}

func runHelper(mode, dir string) int {
	switch mode {
	case "hold-lock":
		return helperHoldLock(dir)
	case "try-lock":
		return helperTryLock(dir)
	case "append-loop":
		return helperAppendLoop(dir)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
}

// helperHoldLock acquires the lock, says so, and holds it until stdin closes.
func helperHoldLock(dir string) int {
	l, err := AcquireLock(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := l.Release(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperTryLock behaves like berthd's startup: lock or print the reason and exit 1.
func helperTryLock(dir string) int {
	l, err := AcquireLock(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_ = l.Release()
	return 0
}

// crashWriters is the number of concurrent committers in the kill -9 helper.
const crashWriters = 8

// crashPart is the payload of every event the kill -9 helper writes: commit K of
// writer W, part I of N.
type crashPart struct {
	W int `json:"w"`
	K int `json:"k"`
	I int `json:"i"`
	N int `json:"n"`
}

func crashStream(w int) string { return fmt.Sprintf("writer/%d", w) }
func crashLease(w int) string  { return fmt.Sprintf("lease-%d", w) }

const crashSharedStream = "shared"

// helperAppendLoop opens the store and commits forever from crashWriters goroutines;
// each commit appends 1–4 parts to the writer's stream, one part to a shared stream
// and one outbox row, then prints "ok W K". It resumes numbering from what is on disk.
func helperAppendLoop(dir string) int {
	l, err := AcquireLock(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Release()
	s, _, err := Open(Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var outMu sync.Mutex
	errs := make(chan error, crashWriters)
	for w := 0; w < crashWriters; w++ {
		loaded, err := s.Load(crashStream(w))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		next := 1
		if n := len(loaded.Events); n > 0 {
			var p crashPart
			if err := json.Unmarshal(loaded.Events[n-1].Data, &p); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			next = p.K + 1
		}
		go func(w, k int) {
			for ; ; k++ {
				n := 1 + k%4
				evs := make([]Event, n)
				for i := range evs {
					data, _ := json.Marshal(crashPart{W: w, K: k, I: i, N: n})
					evs[i] = Event{Type: "crash.part", V: 1, Data: data}
				}
				shared, _ := json.Marshal(crashPart{W: w, K: k, I: 0, N: 1})
				_, err := s.Commit(Write{
					Appends: []Append{
						{Stream: crashStream(w), Events: evs},
						{Stream: crashSharedStream, Events: []Event{{Type: "crash.shared", V: 1, Data: shared}}},
					},
					Outbox: []OutboxRow{{Lease: crashLease(w), DeliveryID: fmt.Sprintf("%d-%d", w, k), URL: "http://127.0.0.1:1/cb", Body: shared, Kind: "operation"}},
				})
				if err != nil {
					errs <- err
					return
				}
				outMu.Lock()
				_, err = fmt.Fprintf(os.Stdout, "ok %d %d\n", w, k)
				outMu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}(w, next)
	}
	// Runs until killed; a failed commit ends the helper with its error.
	fmt.Fprintln(os.Stderr, <-errs)
	return 1
}

// ---- shared test helpers ----

// newStore opens a fresh non-production store in a temp dir.
func newStore(t testing.TB) *Store {
	t.Helper()
	s, info, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if !info.Initialized {
		t.Fatalf("fresh dir not initialised")
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopen closes s and opens its directory again.
func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	dir := filepath.Dir(s.Path())
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, info, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if info.Initialized {
		t.Fatalf("reopen initialised again")
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

func ev(typ string, data any) Event {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	return Event{Type: typ, V: 1, Data: raw}
}

// fileState is a file's bytes, mode and mtime, to prove a refusal touched nothing.
type fileState struct {
	path  string
	data  []byte
	mode  os.FileMode
	mtime time.Time
	link  string
}

// pinFiles backdates every regular file in dir (so any write would move its mtime)
// and records its state; symlinks are recorded by target.
func pinFiles(t *testing.T, dir string) []fileState {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	var out []fileState
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fileState{path: p, link: target, mode: fi.Mode()})
			continue
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fileState{path: p, data: data, mode: fi.Mode(), mtime: old})
	}
	return out
}

// assertUntouched fails if any pinned file changed in bytes, mode or mtime, or if
// the directory gained or lost entries.
func assertUntouched(t *testing.T, dir string, pinned []fileState) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(pinned) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir %s now has %d entries %v, want %d", dir, len(entries), names, len(pinned))
	}
	for _, f := range pinned {
		fi, err := os.Lstat(f.path)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if f.link != "" {
			target, _ := os.Readlink(f.path)
			if target != f.link {
				t.Errorf("%s: symlink now points to %q, was %q", f.path, target, f.link)
			}
			continue
		}
		if fi.Mode() != f.mode {
			t.Errorf("%s: mode %v, was %v", f.path, fi.Mode(), f.mode)
		}
		if !fi.ModTime().Equal(f.mtime) {
			t.Errorf("%s: mtime %v, was %v", f.path, fi.ModTime(), f.mtime)
		}
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if !bytes.Equal(data, f.data) {
			t.Errorf("%s: contents changed (%d bytes, was %d)", f.path, len(data), len(f.data))
		}
	}
}

// assertRefusal checks the sentinel and that the message is one line containing
// every fragment.
func assertRefusal(t *testing.T, err, sentinel error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	msg := err.Error()
	t.Logf("refusal: %s", msg)
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("message is not one line: %q", msg)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("message %q does not contain %q", msg, f)
		}
	}
}

// atoiOrFail parses a decimal the helper printed.
func atoiOrFail(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q: %v", s, err)
	}
	return n
}

// setCommitHook installs a hook consulted inside every write transaction after
// its writes; a non-nil error fails that transaction.
func (s *Store) setCommitHook(h func(*bolt.Tx) error) {
	if h == nil {
		s.commitHook.Store(nil)
		return
	}
	s.commitHook.Store(&h)
}

// setPreBatchHook installs a hook run after a write's latch pre-check and before
// its transaction.
func (s *Store) setPreBatchHook(h func()) {
	if h == nil {
		s.preBatch.Store(nil)
		return
	}
	s.preBatch.Store(&h)
}
