// Package persistence is berth's durable store: state.db (bbolt) with meta, per-stream
// journals and snapshots, and the callback outbox; the storage identity marker; the
// daemon.lock that makes one berthd the owner of a data directory; and the separate,
// recreatable diagnostics.db. It fails closed: anything it cannot prove is berth's own,
// intact, current-schema store is refused with one line and left untouched, except
// that a copied or moved store is re-keyed (location.go) and an unusable
// diagnostics.db, which carries no authority, is set aside and recreated.
package persistence

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
	Dir string // data dir (created 0700 if absent)
	// DiagnosticsFile is diagnostics.db's absolute path (config diagnostics_db_path);
	// "" means <Dir>/diagnostics.db. Its directory is created 0700 if absent.
	DiagnosticsFile string
	MaxFileBytes    int64            // size ceiling for state.db and diagnostics.db; 0 = 1 GiB
	ProductionMode  bool             // never create a storage identity implicitly
	Now             func() time.Time // optional clock

	beforeIdentityWrite func() // tests: runs after validation, before a bind or re-key writes
}

func (o Options) withDefaults() Options {
	o.MaxFileBytes = cmp.Or(max(o.MaxFileBytes, 0), defaultMaxFileBytes)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// OpenInfo reports what Open did.
type OpenInfo struct {
	Initialized bool // a new storage identity and state.db were created (non-production, empty dir)
	// Location is the data dir's resolved location (absolute, symlinks resolved), to
	// which the installation identity is bound.
	Location string
	// LocationBound: a store created by an earlier berthd had no recorded location; it
	// is now bound to Location (once; nothing else changed).
	LocationBound bool
	// Rekey is this open's re-key, or an earlier open's it finished (Rekey.Resumed);
	// nil when neither. Log Rekey.OperatorMessage().
	Rekey *Rekey
	// MetaFallback is set when state.db's newest meta page failed validation and
	// bbolt opened the previous transaction instead, silently dropping the last
	// commit; it names both txids. It is also in Findings.
	MetaFallback string
	// Findings are integrity problems found at open that did not refuse it (one line
	// each), also available from Store.Findings for /health.
	Findings []string
}

// Store is an open, validated state.db. All methods are safe for concurrent use.
type Store struct {
	db         *bolt.DB
	path       string
	markerPath string
	dir        string
	location   string
	identity   Identity
	lastRekey  *Rekey
	findings   []string
	opts       Options
	readOnly   bool   // OpenReadOnly: a private copy; every write is refused
	cleanup    func() // OpenReadOnly: removes the copy at Close

	latchMu    sync.Mutex
	latchErr   error
	latchedCh  chan struct{}
	closed     atomic.Bool
	commitHook atomic.Pointer[func(*bolt.Tx) error] // tests: consulted inside every write tx, after its writes; an error fails it
	preBatch   atomic.Pointer[func()]               // tests: runs after the latch pre-check, before db.Batch
}

// Open validates and opens <dir>/state.db. Everything is checked read-only before a
// byte is written; see the package tests for each refusal. The only writes Open makes
// to an existing store bind its installation identity to the data dir's location:
// recording the location of a store an earlier berthd created, or re-keying a store
// found elsewhere than where its installation id was claimed (see Rekey). The caller
// holds the daemon lock (AcquireLock).
func Open(opts Options) (*Store, OpenInfo, error) {
	opts = opts.withDefaults()
	if err := ensureDir(opts.Dir); err != nil {
		return nil, OpenInfo{}, err
	}
	location, err := resolveLocation(opts.Dir)
	if err != nil {
		return nil, OpenInfo{}, err
	}
	info := OpenInfo{Location: location}
	for attempt := 1; ; attempt++ {
		s, err := openOnce(opts, location, &info)
		switch {
		case err == nil:
			return s, info, nil
		case errors.Is(err, errIdentityRaced) && attempt < maxOpenAttempts:
			continue // another opener won the compare-and-swap: validate its result afresh
		case errors.Is(err, errIdentityRaced):
			return nil, OpenInfo{}, refuseCause(ErrLocked, err, "state.db %s: its installation identity changed under this open %d times in a row (another process is writing it); refusing to start", filepath.Join(opts.Dir, stateFileName), attempt)
		default:
			return nil, OpenInfo{}, err
		}
	}
}

// openOnce is one validation-and-open pass; it returns errIdentityRaced when an
// identity compare-and-swap found meta changed since validation.
func openOnce(opts Options, location string, info *OpenInfo) (*Store, error) {
	files, found, err := findStore(opts.Dir, "refusing to start", " (files left untouched)")
	if err != nil {
		return nil, err
	}
	if !found {
		if opts.ProductionMode {
			return nil, refuse(ErrNoIdentity, "%s has no storage identity (%s) and production mode never creates one implicitly; run berthd -initialize-storage-identity new", opts.Dir, markerFileName)
		}
		if _, err := createStore(opts, files, location, writePlan{}); err != nil {
			return nil, err
		}
		info.Initialized = true
	}
	marker, err := readMarker(files.marker)
	if err != nil {
		return nil, err
	}
	// Before anything writes: the first commit overwrites a bad meta page.
	fallback, findings, metaFID, err := inspectMetaPages(files.state, "state.db", opts.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	if info.MetaFallback == "" {
		info.MetaFallback = fallback
	}
	for _, f := range findings {
		if !slices.Contains(info.Findings, f) {
			info.Findings = append(info.Findings, f)
		}
	}
	st, action, fid, err := planOpen(files.state, files, marker, location, opts.MaxFileBytes)
	if err != nil {
		return nil, withFinding(err, fallback)
	}
	if fid != metaFID {
		return nil, refuse(ErrUnsafeFile, "state.db %s was replaced during validation; refusing it", files.state)
	}
	if action != identityCurrent && opts.beforeIdentityWrite != nil {
		opts.beforeIdentityWrite()
	}
	db, err := openBoltRW(files.state, "state.db", fid, opts.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	identity, err := settleIdentity(db, opts, files, st, action, location, info)
	if err != nil {
		db.Close()
		return nil, err
	}
	db.MaxBatchDelay = batchMaxDelay
	db.MaxBatchSize = batchMaxSize
	s := storeOver(db, files, opts, location, identity, info.Findings)
	s.lastRekey = cmp.Or(info.Rekey, st.recordedRekey())
	return s, nil
}

// storeOver is a Store over the validated, opened db.
func storeOver(db *bolt.DB, files storeFiles, opts Options, location string, id Identity, findings []string) *Store {
	return &Store{db: db, path: files.state, markerPath: files.marker, dir: opts.Dir, location: location,
		identity: id, findings: slices.Clone(findings), opts: opts, latchedCh: make(chan struct{})}
}

// storeFiles are the paths of a data dir's state.db and storage identity marker.
type storeFiles struct{ state, marker string }

func filesIn(dir string) storeFiles {
	return storeFiles{state: filepath.Join(dir, stateFileName), marker: filepath.Join(dir, markerFileName)}
}

// findStore reports whether dir holds a store, refusing half of one (either file
// without the other) as foreign. refusing and kept finish its message: what the
// caller does ("refusing to start") and what becomes of the files.
func findStore(dir, refusing, kept string) (files storeFiles, found bool, err error) {
	files = filesIn(dir)
	markerExists, err := lexists(files.marker)
	if err != nil {
		return files, false, err
	}
	stateExists, err := lexists(files.state)
	if err != nil {
		return files, false, err
	}
	switch {
	case stateExists && !markerExists:
		return files, false, refuse(ErrForeign, "state.db %s exists but storage identity marker %s is missing; %s rather than adopt or re-initialise it%s", files.state, files.marker, refusing, kept)
	case markerExists && !stateExists:
		return files, false, refuse(ErrForeign, "storage identity marker %s exists but state.db %s is missing; %s rather than create an empty store under an existing identity%s", files.marker, files.state, refusing, kept)
	}
	return files, stateExists, nil
}

// planOpen validates the bbolt file at path (state.db or a private copy of it) and
// its meta against the marker, and plans what Open does about the installation
// identity. It returns the validated inode.
func planOpen(path string, files storeFiles, marker Identity, location string, ceiling int64) (st stateMeta, action identityAction, fid fileID, err error) {
	fid, err = inspectBolt(path, files.state, "state.db", ceiling, func(tx *bolt.Tx) error {
		var err error
		if st, err = readStateMeta(tx, files.state); err != nil {
			return err
		}
		action, err = planIdentity(st, marker, location, files.state, files.marker)
		return err
	})
	return st, action, fid, err
}

// settleIdentity carries out action on the opened state.db — binds the location,
// re-keys, or republishes a committed re-key in the marker — and returns the
// identity the store now has.
func settleIdentity(db *bolt.DB, opts Options, files storeFiles, st stateMeta, action identityAction, location string, info *OpenInfo) (Identity, error) {
	identity := st.id
	switch action {
	case identityBind:
		if err := db.Update(func(tx *bolt.Tx) error { return bindLocationTx(tx, files.state, st, location) }); err != nil {
			if errors.Is(err, errIdentityRaced) {
				return identity, err
			}
			return identity, fmt.Errorf("bind installation identity of state.db %s to %s: %w", files.state, location, err)
		}
		info.LocationBound = true
	case identityRekey:
		newID := uuid.NewString()
		at := opts.Now().UTC().Round(0)
		if err := db.Update(func(tx *bolt.Tx) error { return rekeyTx(tx, files.state, st, newID, location, at) }); err != nil {
			if errors.Is(err, errIdentityRaced) {
				return identity, err
			}
			return identity, fmt.Errorf("re-key installation identity of state.db %s: %w", files.state, err)
		}
		identity.InstallationID = newID
		info.Rekey = &Rekey{StorageID: identity.StorageID, OldInstallationID: st.id.InstallationID, NewInstallationID: newID,
			OldLocation: st.location, NewLocation: location, At: at}
		if err := publishMarker(files.marker, identity, os.Rename); err != nil {
			return identity, fmt.Errorf("state.db %s was re-keyed to installation_id %s but publishing it in marker %s failed (the next start completes it): %w", files.state, newID, files.marker, err)
		}
	case identityRepublish:
		info.Rekey = st.recordedRekey()
		info.Rekey.Resumed = true
		if err := publishMarker(files.marker, identity, os.Rename); err != nil {
			return identity, fmt.Errorf("state.db %s was re-keyed to installation_id %s but publishing it in marker %s failed again (the next start retries): %w", files.state, identity.InstallationID, files.marker, err)
		}
	}
	return identity, nil
}

// Identity is the storage identity (marker = meta).
func (s *Store) Identity() Identity { return s.identity }

// Location is the data dir's resolved location, to which the installation id is bound.
func (s *Store) Location() string { return s.location }

// Findings are the integrity problems found at open that did not refuse it (see
// OpenInfo.Findings), one line each, for /health detail and a metric.
func (s *Store) Findings() []string { return slices.Clone(s.findings) }

// LastRekey is the most recent re-key recorded in meta (by this open or an earlier
// one), so the operator can still be told after a restart that swallowed the log.
func (s *Store) LastRekey() (Rekey, bool) {
	if s.lastRekey == nil {
		return Rekey{}, false
	}
	return *s.lastRekey, true
}

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

// writable refuses a write on a latched, closed or read-only store.
func (s *Store) writable() error {
	if first := s.Err(); first != nil {
		return &latchedError{path: s.path, first: first}
	}
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", s.path, errClosed)
	}
	if s.readOnly {
		return fmt.Errorf("%s: %w", s.path, errReadOnly)
	}
	return nil
}

// writableFor is writable, then validName: a write to the stream or lease name.
func (s *Store) writableFor(kind, name string) error {
	if err := s.writable(); err != nil {
		return err
	}
	return validName(kind, name)
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
	s.Latch(fmt.Errorf("%s %s: %w", op, s.path, err))
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

// Check is the health probe: Attest, and the file under its ceiling.
func (s *Store) Check() error {
	if err := s.Attest(); err != nil {
		return err
	}
	var size int64
	if err := s.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		return fmt.Errorf("read %s: %w", s.path, err)
	}
	if size > s.opts.MaxFileBytes {
		return refuse(ErrTooLarge, "state.db %s holds %d bytes, over the configured ceiling of %d bytes; it will be refused at the next start", s.path, size, s.opts.MaxFileBytes)
	}
	return nil
}

// Attest is the runtime storage-identity verification every protected request
// passes (and Check): not latched, a read transaction works, and the marker on
// disk and state.db's meta still say this store's identity and location. Drift
// (the marker changed, vanished or no longer matches) is terminal and latches
// the store.
func (s *Store) Attest() error {
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
	err = s.db.View(func(tx *bolt.Tx) error {
		st, err := verifyStateMeta(tx, s.path, s.markerPath, s.identity)
		if err == nil && st.location != s.location {
			err = refuse(ErrForeign, "state.db %s now binds its installation identity to %s, not %s", s.path, st.location, s.location)
		}
		return err
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
	return nil
}

// Close closes state.db; later writes fail (without latching).
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.db.Close()
	if s.cleanup != nil {
		s.cleanup()
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// withFinding appends a meta fallback to a refusal of the same open: a store refused
// as foreign or inconsistent may be so because its last commit was dropped.
func withFinding(err error, fallback string) error {
	var r *refusal
	if fallback == "" || !errors.As(err, &r) {
		return err
	}
	return &refusal{kind: r.kind, msg: r.msg + "; also: " + fallback, cause: r.cause}
}
