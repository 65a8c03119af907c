// Package persistence is berth's durable store: state.db (bbolt) with meta, per-stream
// journals and snapshots, and the callback outbox; the storage identity marker; the
// daemon.lock that makes one berthd the owner of a data directory; and the separate,
// recreatable diagnostics.db. It fails closed: anything it cannot prove is berth's own,
// intact, current-schema store is refused with one line and left untouched.
package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// db.Batch tuning, measured with BenchmarkAppend64Writers/BenchmarkAppendLoneWriter
// on the 2-core CI box: a 1 ms delay keeps a lone writer at ~1.4 ms per commit (the
// default 10 ms would be the floor of every lease transition); a batch size of half
// the benchmark's 64 writers lets one batch fill while the previous one fsyncs
// (~30k events/s, p99 ~3.5 ms; bbolt's default 1000 waits out the timer every time).
const (
	batchMaxDelay = 1 * time.Millisecond
	batchMaxSize  = 32
)

// defaultMaxFileBytes is the size ceiling when Options.MaxFileBytes is 0.
const defaultMaxFileBytes int64 = 1 << 30

// Options configure Open, InitializeIdentity and OpenDiagnostics.
type Options struct {
	Dir            string           // data dir (created 0700 if absent)
	MaxFileBytes   int64            // size ceiling for state.db and diagnostics.db; 0 = 1 GiB
	ProductionMode bool             // never create a storage identity implicitly
	Now            func() time.Time // optional clock
}

func (o Options) withDefaults() Options {
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = defaultMaxFileBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// OpenInfo reports what Open did.
type OpenInfo struct {
	Initialized bool // a new storage identity and state.db were created (non-production, empty dir)
}

// Store is an open, validated state.db. All methods are safe for concurrent use.
type Store struct {
	db         *bolt.DB
	path       string
	markerPath string
	dir        string
	identity   Identity
	opts       Options

	latchMu    sync.Mutex
	latchErr   error
	latchedCh  chan struct{}
	closed     atomic.Bool
	commitHook atomic.Pointer[func(*bolt.Tx) error] // tests: consulted inside every write tx, after its writes
	preBatch   atomic.Pointer[func()]               // tests: runs after the pre-check, before db.Batch
}

// Open validates and opens <dir>/state.db. Everything is checked read-only before a
// byte is written; see the package tests for each refusal. The caller holds the
// daemon lock (AcquireLock).
func Open(opts Options) (*Store, OpenInfo, error) {
	opts = opts.withDefaults()
	if err := ensureDir(opts.Dir); err != nil {
		return nil, OpenInfo{}, err
	}
	statePath := filepath.Join(opts.Dir, stateFileName)
	markerPath := filepath.Join(opts.Dir, markerFileName)
	markerExists, err := lexists(markerPath)
	if err != nil {
		return nil, OpenInfo{}, err
	}
	stateExists, err := lexists(statePath)
	if err != nil {
		return nil, OpenInfo{}, err
	}

	var info OpenInfo
	switch {
	case !markerExists && !stateExists:
		if opts.ProductionMode {
			return nil, OpenInfo{}, refuse(ErrNoIdentity, "%s has no storage identity (%s) and production mode never creates one implicitly; run berthd -initialize-storage-identity new", opts.Dir, markerFileName)
		}
		if _, err := createStore(opts, statePath, markerPath); err != nil {
			return nil, OpenInfo{}, err
		}
		info.Initialized = true
	case stateExists && !markerExists:
		return nil, OpenInfo{}, refuse(ErrForeign, "state.db %s exists but storage identity marker %s is missing; refusing to start rather than adopt or re-initialise it (files left untouched)", statePath, markerPath)
	case markerExists && !stateExists:
		return nil, OpenInfo{}, refuse(ErrForeign, "storage identity marker %s exists but state.db %s is missing; refusing to start rather than create an empty store under an existing identity (files left untouched)", markerPath, statePath)
	}

	marker, err := readMarker(markerPath)
	if err != nil {
		return nil, OpenInfo{}, err
	}
	fid, err := inspectBolt(statePath, "state.db", opts.MaxFileBytes, func(tx *bolt.Tx) error {
		return verifyStateMeta(tx, statePath, markerPath, marker)
	})
	if err != nil {
		return nil, OpenInfo{}, err
	}
	db, err := openBoltRW(statePath, "state.db", fid, opts.MaxFileBytes)
	if err != nil {
		return nil, OpenInfo{}, err
	}
	db.MaxBatchDelay = batchMaxDelay
	db.MaxBatchSize = batchMaxSize
	s := &Store{
		db:         db,
		path:       statePath,
		markerPath: markerPath,
		dir:        opts.Dir,
		identity:   marker,
		opts:       opts,
		latchedCh:  make(chan struct{}),
	}
	return s, info, nil
}

// Identity is the storage identity (marker = meta).
func (s *Store) Identity() Identity { return s.identity }

// Path is state.db's path.
func (s *Store) Path() string { return s.path }

// Err returns the cause that latched the store, or nil.
func (s *Store) Err() error {
	s.latchMu.Lock()
	defer s.latchMu.Unlock()
	return s.latchErr
}

// Latched is closed when the store latches; the root supervisor drains and exits 1.
func (s *Store) Latched() <-chan struct{} { return s.latchedCh }

// Latch records cause as the first failure (later calls are ignored) and refuses
// every later write. Reads keep working.
func (s *Store) Latch(cause error) {
	if cause == nil {
		cause = errors.New("latched without a cause")
	}
	s.latchMu.Lock()
	defer s.latchMu.Unlock()
	if s.latchErr != nil {
		return
	}
	s.latchErr = cause
	close(s.latchedCh)
}

// writable refuses a write on a latched or closed store.
func (s *Store) writable() error {
	if first := s.Err(); first != nil {
		return &latchedError{path: s.path, first: first}
	}
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", s.path, errClosed)
	}
	return nil
}

// update runs fn in a shared db.Batch transaction. fn may run more than once (bbolt
// re-runs a batch without a failed member), so it must derive everything from tx.
// An input refusal rolls back and returns as is; any other failure — of fn, the
// commit or its fsync — leaves the outcome unknown to the caller's model, so it
// latches the store.
func (s *Store) update(op string, fn func(*bolt.Tx) error) error {
	if err := s.writable(); err != nil {
		return err
	}
	if h := s.preBatch.Load(); h != nil {
		(*h)()
	}
	err := s.db.Batch(func(tx *bolt.Tx) error {
		// Re-checked under the writer lock: a latch raised after the first check
		// must still stop this write.
		if first := s.Err(); first != nil {
			return &latchedError{path: s.path, first: first}
		}
		return callSafely(tx, fn, s.commitHook.Load())
	})
	if err == nil {
		return nil
	}
	var le *latchedError
	if IsInputError(err) || errors.As(err, &le) {
		return err
	}
	if s.closed.Load() && errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%s: %w", s.path, errClosed)
	}
	cause := fmt.Errorf("%s %s: %w", op, s.path, err)
	s.Latch(cause)
	return &latchedError{path: s.path, first: s.Err()}
}

// callSafely runs fn and then the test hook, turning a panic into an error: bbolt
// re-runs a failed batch member solo through db.Update, which would let a panic
// escape into the caller.
func callSafely(tx *bolt.Tx, fn func(*bolt.Tx) error, hook *func(*bolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write transaction: %v", p)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if hook != nil {
		return (*hook)(tx)
	}
	return nil
}

// Check is the health probe: not latched, a read transaction works, meta still
// matches the marker on disk, and the file is under its ceiling. Identity drift (the
// marker changed, vanished or no longer matches) is terminal and latches the store.
func (s *Store) Check() error {
	if first := s.Err(); first != nil {
		return &latchedError{path: s.path, first: first}
	}
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", s.path, errClosed)
	}
	marker, err := readMarker(s.markerPath)
	if err != nil {
		var r *refusal
		if errors.As(err, &r) || errors.Is(err, os.ErrNotExist) {
			drift := fmt.Errorf("storage identity drift: %w", err)
			s.Latch(drift)
			return drift
		}
		return err
	}
	if marker.StorageID != s.identity.StorageID || marker.InstallationID != s.identity.InstallationID {
		drift := refuse(ErrForeign, "storage identity drift: marker %s now says storage_id %s, installation_id %s; this store is %s, %s",
			s.markerPath, marker.StorageID, marker.InstallationID, s.identity.StorageID, s.identity.InstallationID)
		s.Latch(drift)
		return drift
	}
	var size int64
	err = s.db.View(func(tx *bolt.Tx) error {
		size = tx.Size()
		return verifyStateMeta(tx, s.path, s.markerPath, s.identity)
	})
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			drift := fmt.Errorf("storage identity drift: %w", err)
			s.Latch(drift)
			return drift
		}
		return fmt.Errorf("read %s: %w", s.path, err)
	}
	if size > s.opts.MaxFileBytes {
		return refuse(ErrTooLarge, "state.db %s holds %d bytes, over the configured ceiling of %d bytes; it will be refused at the next start", s.path, size, s.opts.MaxFileBytes)
	}
	return nil
}

// Close closes state.db; later writes fail (without latching).
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// setCommitHook installs a test hook consulted inside every write transaction after
// its writes; a non-nil error fails that transaction.
func (s *Store) setCommitHook(h func(*bolt.Tx) error) {
	if h == nil {
		s.commitHook.Store(nil)
		return
	}
	s.commitHook.Store(&h)
}

// setPreBatchHook installs a test hook run after a write's latch pre-check and before
// its transaction.
func (s *Store) setPreBatchHook(h func()) {
	if h == nil {
		s.preBatch.Store(nil)
		return
	}
	s.preBatch.Store(&h)
}
