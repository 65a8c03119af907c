package persistence

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// diagnostics.db layout: meta{schema_version} and leases/<lease>, whose keys are
// 8-byte big-endian unix-nanos then an 8-byte per-bucket counter (so two captures at
// the same instant both survive), in time order.
var bucketDiagLeases = []byte("leases")

// Diagnostics is the separate, recreatable diagnostics.db (failure captures, bounded
// logs). It carries no lifecycle authority and is not identity-bound, but gets the
// same open-time file checks as state.db. Safe for concurrent use.
type Diagnostics struct {
	db       *bolt.DB
	path     string
	fid      fileID // the file opened, which Check expects still at path
	setAside *DiagnosticsSetAside
}

// DiagnosticsSetAside says OpenDiagnostics found a diagnostics.db it could not use
// and moved it out of the way before creating a fresh one.
type DiagnosticsSetAside struct {
	// Path is where the old entry now is: the same inode renamed (a symlink is
	// renamed itself, never followed), bytes untouched, nothing deleted.
	Path string
	// Reason is why it was unusable, one line (the open-time check's refusal,
	// without its "refusing…" tail).
	Reason string
	// Err is that refusal; it wraps ErrCorrupt, ErrUnsafeFile, ErrTooLarge,
	// ErrNewerSchema or fs.ErrPermission.
	Err error
}

// setAsideInfix names a set-aside diagnostics.db: <file>.set-aside-<UTC time>[-n].
const setAsideInfix = ".set-aside-"

// OpenDiagnostics opens Options.DiagnosticsFile (default <Dir>/diagnostics.db),
// creating it when absent. An existing file that cannot be used — a symlink or other
// non-regular or hard-linked entry, a mode other than 0600, over the ceiling,
// corrupt, of a newer schema, unreadable — carries no authority, so it is set aside
// (renamed to <file>.set-aside-<UTC time>, see SetAside) and a fresh one created.
// Only failing to set it aside or to create the fresh file is an error, as is a file
// another process holds locked (it is in use, not damaged).
func OpenDiagnostics(opts Options) (*Diagnostics, error) {
	opts = opts.withDefaults()
	path, err := diagnosticsPath(opts)
	if err != nil {
		return nil, err
	}
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	d, refused := openDiagnosticsFile(path, opts.MaxFileBytes)
	if refused == nil {
		return d, nil
	}
	if !settableAside(refused) {
		return nil, refused
	}
	aside, err := setAsideFile(path, opts.Now())
	if err != nil {
		return nil, fmt.Errorf("diagnostics.db %s is unusable (%v) and setting it aside failed: %w", path, refused, err)
	}
	d, err = openDiagnosticsFile(path, opts.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("diagnostics.db %s was set aside to %s (%v) but a fresh one could not be opened: %w", path, aside, refused, err)
	}
	d.setAside = &DiagnosticsSetAside{Path: aside, Reason: reasonOf(refused), Err: refused}
	return d, nil
}

// reasonOf is a refusal's message without its "; refusing …" tail.
func reasonOf(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "; refusing"); i > 0 {
		return msg[:i]
	}
	return msg
}

// OperatorMessage is a one-line log message for the set-aside.
func (a DiagnosticsSetAside) OperatorMessage() string {
	return oneLine(fmt.Sprintf("diagnostics.db was unusable and was set aside to %s (kept, not deleted), and a fresh one created; earlier failure captures are only in the set-aside file: %s", a.Path, a.Reason))
}

// diagnosticsPath is Options.DiagnosticsFile, or <Dir>/diagnostics.db.
func diagnosticsPath(opts Options) (string, error) {
	if opts.DiagnosticsFile == "" {
		if opts.Dir == "" {
			return "", errors.New("persistence: data dir is empty")
		}
		return filepath.Join(opts.Dir, diagnosticsFileName), nil
	}
	if !filepath.IsAbs(opts.DiagnosticsFile) || filepath.Clean(opts.DiagnosticsFile) != opts.DiagnosticsFile || strings.HasSuffix(opts.DiagnosticsFile, "/") {
		return "", fmt.Errorf("persistence: diagnostics file %q is not a clean absolute file path", opts.DiagnosticsFile)
	}
	return opts.DiagnosticsFile, nil
}

// settableAside reports whether err says the file at the path is unusable (and so
// may be set aside), rather than in use or the directory being at fault.
func settableAside(err error) bool {
	unusable := []error{ErrCorrupt, ErrUnsafeFile, ErrTooLarge, ErrNewerSchema, fs.ErrPermission}
	return !errors.Is(err, ErrLocked) && slices.ContainsFunc(unusable, func(kind error) bool { return errors.Is(err, kind) })
}

// setAsideFile renames path (whatever kind of entry it is, never following it) to a
// fresh <path>.set-aside-<UTC time>[-n] sibling and makes the rename durable.
func setAsideFile(path string, now time.Time) (string, error) {
	base := path + setAsideInfix + now.UTC().Format("20060102T150405.000000000Z")
	for n := 0; n < 100; n++ {
		aside := base
		if n > 0 {
			aside = fmt.Sprintf("%s-%d", base, n)
		}
		err := renameNoReplace(path, aside)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		return aside, SyncDir(filepath.Dir(path))
	}
	return "", fmt.Errorf("set aside %s: 100 names under %s* already taken", path, base)
}

// openDiagnosticsFile creates path when absent, then validates and opens it.
func openDiagnosticsFile(path string, ceiling int64) (*Diagnostics, error) {
	exists, err := lexists(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		err := createBoltFile(path, func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(SchemaVersion))); err != nil {
				return err
			}
			_, err = tx.CreateBucket(bucketDiagLeases)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("create diagnostics.db %s: %w", path, err)
		}
	}
	fid, err := inspectBolt(path, path, "diagnostics.db", ceiling, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return refuse(ErrCorrupt, "diagnostics.db %s has no meta bucket; refusing it (file left untouched)", path)
		}
		return readSchema(meta, "diagnostics.db", path)
	})
	if err != nil {
		return nil, err
	}
	db, err := openBoltRW(path, "diagnostics.db", fid, ceiling)
	if err != nil {
		return nil, err
	}
	return &Diagnostics{db: db, path: path, fid: fid}, nil
}

// SetAside reports the unusable diagnostics.db this open set aside, if any, so the
// daemon can log and count it.
func (d *Diagnostics) SetAside() (DiagnosticsSetAside, bool) {
	if d.setAside == nil {
		return DiagnosticsSetAside{}, false
	}
	return *d.setAside, true
}

// Size is diagnostics.db's size on disk, which the next open checks against the
// ceiling (bbolt reuses pages Prune frees but never shrinks the file).
func (d *Diagnostics) Size() (int64, error) {
	fi, err := os.Lstat(d.path)
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", d.path, err)
	}
	return fi.Size(), nil
}

// Check is /health's probe: the file opened is still at its path and writable,
// and a read transaction finds its buckets. Gone, replaced, read-only or
// unreadable, it would lose failure captures silently while berthd said healthy.
func (d *Diagnostics) Check() error {
	var st unix.Stat_t
	if err := unix.Lstat(d.path, &st); err != nil {
		return fmt.Errorf("diagnostics.db %s: %w", d.path, err)
	}
	if (fileID{dev: uint64(st.Dev), ino: st.Ino}) != d.fid {
		return refuse(ErrUnsafeFile, "diagnostics.db %s is no longer the file berthd opened (replaced or moved)", d.path)
	}
	if err := unix.Access(d.path, unix.W_OK); err != nil {
		return fmt.Errorf("diagnostics.db %s is not writable: %w", d.path, err)
	}
	return d.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil || tx.Bucket(bucketDiagLeases) == nil {
			return refuse(ErrCorrupt, "diagnostics.db %s lost its buckets", d.path)
		}
		return nil
	})
}

// Path is diagnostics.db's path.
func (d *Diagnostics) Path() string { return d.path }

func diagKey(at time.Time, n uint64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(max(at.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[8:], n)
	return k[:]
}

// Put stores blob (valid JSON) for lease at time at.
func (d *Diagnostics) Put(lease string, at time.Time, blob json.RawMessage) error {
	if err := validName("lease", lease); err != nil {
		return err
	}
	if !json.Valid(blob) {
		return badInput("diagnostics blob for lease %q is not valid JSON", lease)
	}
	err := d.db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketDiagLeases)
		if err != nil {
			return err
		}
		lb, err := root.CreateBucketIfNotExists([]byte(lease))
		if err != nil {
			return err
		}
		n, err := lb.NextSequence()
		if err != nil {
			return err
		}
		return lb.Put(diagKey(at, n), blob)
	})
	if err != nil {
		return fmt.Errorf("put diagnostics for %q in %s: %w", lease, d.path, err)
	}
	return nil
}

// readLease runs fn, in a read transaction, on lease's bucket when it has one.
func (d *Diagnostics) readLease(op, lease string, fn func(lb *bolt.Bucket)) error {
	if err := validName("lease", lease); err != nil {
		return err
	}
	err := d.db.View(func(tx *bolt.Tx) error {
		if lb := nested(tx, bucketDiagLeases, lease); lb != nil {
			fn(lb)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s diagnostics for %q in %s: %w", op, lease, d.path, err)
	}
	return nil
}

// Latest returns the most recent blob stored for lease.
func (d *Diagnostics) Latest(lease string) (json.RawMessage, bool, error) {
	var out json.RawMessage
	err := d.readLease("read", lease, func(lb *bolt.Bucket) {
		if k, v := lb.Cursor().Last(); k != nil {
			out = append(json.RawMessage(nil), v...)
		}
	})
	return out, out != nil, err
}

// DiagnosticsEntry is one stored blob with the time it was stored under.
type DiagnosticsEntry struct {
	At   time.Time
	Blob json.RawMessage
}

// Recent returns up to n of the newest blobs stored for lease, newest first.
func (d *Diagnostics) Recent(lease string, n int) ([]DiagnosticsEntry, error) {
	var out []DiagnosticsEntry
	err := d.readLease("read", lease, func(lb *bolt.Bucket) {
		c := lb.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			if len(k) != 16 || v == nil {
				continue // not this layout's key: kept for inspection, not served
			}
			at := time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))).UTC()
			out = append(out, DiagnosticsEntry{At: at, Blob: append(json.RawMessage(nil), v...)})
		}
	})
	return out, err
}

// Count is how many blobs are stored for lease.
func (d *Diagnostics) Count(lease string) (n int, err error) {
	err = d.readLease("count", lease, func(lb *bolt.Bucket) { n = lb.Stats().KeyN })
	return n, err
}

// pruneBatch bounds the deletions of one Prune transaction, so an hourly prune of a
// large backlog never holds the writer lock (blocking Put) or dirties pages for long.
const pruneBatch = 10000

// errPruneBudget ends one Prune transaction's walk when its batch is full.
var errPruneBudget = errors.New("prune batch full")

// Prune deletes every blob stored before olderThan, drops leases left empty, and
// returns how many blobs it deleted. Each lease's keys are in time order, so a
// lease costs one cursor seek plus one per deleted blob: the walk stops at its first
// young key. Deletions are committed in batches of pruneBatch. Keys that are not
// this layout's (malformed observational rows) are kept for inspection and do not
// stop the expiry of the rows around them.
func (d *Diagnostics) Prune(olderThan time.Time) (int, error) {
	cutoff := uint64(max(olderThan.UnixNano(), 0))
	total := 0
	for {
		n, more, err := d.pruneOnce(cutoff, pruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune diagnostics in %s: %w", d.path, err)
		}
		if !more {
			return total, nil
		}
	}
}

// pruneOnce deletes up to budget expired blobs in one transaction; more reports that
// the budget ran out before the walk finished.
func (d *Diagnostics) pruneOnce(cutoff uint64, budget int) (deleted int, more bool, err error) {
	err = d.db.Update(func(tx *bolt.Tx) error {
		deleted, more = 0, false
		root := tx.Bucket(bucketDiagLeases)
		if root == nil {
			return nil
		}
		var empty [][]byte
		err := root.ForEachBucket(func(name []byte) error {
			lb := root.Bucket(name)
			c := lb.Cursor()
			k, v := c.First()
			for k != nil {
				if v == nil || len(k) != 16 { // not a blob of this layout: keep it
					k, v = c.Next()
					continue
				}
				if binary.BigEndian.Uint64(k[:8]) >= cutoff {
					break
				}
				if deleted == budget {
					more = true
					return errPruneBudget
				}
				key := append([]byte(nil), k...)
				if err := c.Delete(); err != nil {
					return err
				}
				deleted++
				// Re-seek after a delete: bbolt cursors may skip an entry when Next
				// follows Delete.
				k, v = c.Seek(key)
			}
			if first, _ := lb.Cursor().First(); first == nil {
				empty = append(empty, append([]byte(nil), name...))
			}
			return nil
		})
		if err != nil && !errors.Is(err, errPruneBudget) {
			return err
		}
		for _, name := range empty {
			if err := root.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return deleted, more, nil
}

// Close closes diagnostics.db.
func (d *Diagnostics) Close() error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", d.path, err)
	}
	return nil
}
