package persistence

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// lockTimeout bounds bbolt's own flock wait: daemon.lock already excludes other
// daemons, so contention here means a foreign process and should fail fast.
const lockTimeout = 500 * time.Millisecond

// maxBucketDepth is deeper than any layout we write (root → journal → stream); a
// deeper tree is corruption, and the bound keeps a cyclic page graph from recursing forever.
const maxBucketDepth = 4

// minFileBytes: a bbolt file holds at least two meta pages.
var minFileBytes = int64(2 * os.Getpagesize())

// noFollowOpener is a bbolt OpenFile hook: it never follows a symlink, never creates,
// and validates the opened descriptor's shape before bbolt reads a byte of it.
func noFollowOpener(what string, ceiling int64, onOpen func(id fileID, size int64) error) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, _ os.FileMode) (*os.File, error) {
		f, err := openNoFollow(name, what, flag&^os.O_CREATE)
		if err != nil {
			return nil, err
		}
		id, size, err := checkShape(f, what, ceiling)
		if err == nil && onOpen != nil {
			err = onOpen(id, size)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
}

// inspectBolt validates a bbolt file strictly read-only (O_RDONLY descriptors, bbolt
// ReadOnly), so a refused file is left byte-for-byte and mtime untouched: shape checks
// on the descriptor, bbolt's meta validation, a high-water-mark-versus-size truncation
// check, then a second open that loads the freelist, walks every bucket and value and
// runs tx.Check, and finally the caller's check. bbolt panics on damaged pages, and
// faults on the mapping (SetPanicOnFault makes SIGBUS/SIGSEGV recoverable in this
// goroutine), become ErrCorrupt. It returns the validated inode. Messages name the
// file shown: a private copy of state.db (OpenReadOnly) is reported as the original.
func inspectBolt(path, shown, what string, ceiling int64, check func(*bolt.Tx) error) (fid fileID, err error) {
	if err := checkEntry(path, what); err != nil {
		return fileID{}, err
	}
	in := &boltInspection{path: path, shown: shown, what: what}
	in.opener = noFollowOpener(what, ceiling, func(id fileID, sz int64) error {
		if sz < minFileBytes {
			return refuse(ErrCorrupt, "%s %s is truncated: %d bytes, smaller than two bbolt pages; refusing to start (file left untouched)", what, shown, sz)
		}
		in.fid, in.size = id, sz
		return nil
	})

	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if in.tx != nil {
			swallowPanic(func() { _ = in.tx.Rollback() })
		}
		if in.db != nil {
			swallowPanic(func() { _ = in.db.Close() })
		}
		fid = fileID{}
		err = refuse(ErrCorrupt, "%s %s is corrupt: reading it failed (%v); refusing to start (file left untouched)", what, shown, p)
	}()

	// Pass 1 reads only the meta pages: a file shorter than its own high-water mark
	// is truncated, and saying so beats whatever bbolt would trip over first.
	if err := in.begin(false, nil); err != nil {
		return fileID{}, err
	}
	firstID := in.fid
	in.close()

	// Pass 2 loads the freelist here (under SetPanicOnFault, not in tx.Check's own
	// goroutine), walks every bucket and value, and runs tx.Check.
	if err := in.begin(true, &firstID); err != nil {
		return fileID{}, err
	}
	if err := walkTx(in.tx); err != nil {
		return fileID{}, in.corrupt(err, "%s %s is corrupt: %v; refusing to start (file left untouched)", what, shown, err)
	}
	if err := consistencyCheck(in.tx); err != nil {
		return fileID{}, in.corrupt(err, "%s %s failed bbolt's consistency check: %v; refusing to start (file left untouched)", what, shown, err)
	}
	if check != nil {
		if err := check(in.tx); err != nil {
			in.close()
			return fileID{}, err
		}
	}
	in.close()
	return in.fid, nil
}

// boltInspection is one inspectBolt: the file it reads, what its opener saw, and
// the handles a refusal or a recovered fault must release.
type boltInspection struct {
	path, shown, what string
	opener            func(string, int, os.FileMode) (*os.File, error)
	fid               fileID
	size              int64
	db                *bolt.DB
	tx                *bolt.Tx
}

// begin opens the file read-only and starts a read transaction, refusing a file
// shorter than its meta page's high-water mark; with same, also one that is no
// longer the inode an earlier pass validated.
func (in *boltInspection) begin(preloadFreelist bool, same *fileID) error {
	var err error
	in.db, err = bolt.Open(in.path, fileMode, &bolt.Options{ReadOnly: true, Timeout: lockTimeout, OpenFile: in.opener, PreLoadFreelist: preloadFreelist})
	if err != nil {
		return classifyOpenError(in.shown, in.what, err)
	}
	if same != nil && in.fid != *same {
		in.close()
		return refuse(ErrUnsafeFile, "%s %s was replaced during validation; refusing it", in.what, in.shown)
	}
	if in.tx, err = in.db.Begin(false); err != nil {
		return in.corrupt(err, "%s %s is corrupt: %v; refusing to start (file left untouched)", in.what, in.shown, err)
	}
	if hwm := in.tx.Size(); hwm > in.size {
		return in.corrupt(nil, "%s %s is truncated: %d bytes on disk but its meta page says %d; refusing to start (file left untouched)", in.what, in.shown, in.size, hwm)
	}
	return nil
}

func (in *boltInspection) close() {
	if in.tx != nil {
		_ = in.tx.Rollback()
		in.tx = nil
	}
	if in.db != nil {
		_ = in.db.Close()
		in.db = nil
	}
}

func (in *boltInspection) corrupt(cause error, format string, args ...any) error {
	in.close()
	return refuseCause(ErrCorrupt, cause, format, args...)
}

// classifyOpenError maps a bbolt.Open failure to a refusal.
func classifyOpenError(path, what string, err error) error {
	var r *refusal
	var pe *os.PathError
	switch {
	case errors.As(err, &r):
		return err
	case errors.Is(err, bolterrors.ErrTimeout):
		return refuseCause(ErrLocked, err, "%s %s is locked by another process", what, path)
	case errors.As(err, &pe):
		return fmt.Errorf("open %s %s: %w", what, path, err)
	default:
		return refuseCause(ErrCorrupt, err, "%s %s is not a valid bbolt database (%v); refusing to start (file left untouched)", what, path, err)
	}
}

func swallowPanic(fn func()) {
	defer func() { _ = recover() }()
	fn()
}

// walkTx touches every key and value of every bucket, so a damaged page faults here,
// in the protected goroutine, rather than in tx.Check's unprotected one.
func walkTx(tx *bolt.Tx) error {
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		return walkBucket(b, string(name), 1)
	})
}

func walkBucket(b *bolt.Bucket, path string, depth int) error {
	if depth > maxBucketDepth {
		return fmt.Errorf("bucket %q nested deeper than %d", path, maxBucketDepth)
	}
	var sink byte
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		sink ^= k[0] ^ k[len(k)-1]
		if v != nil {
			if len(v) > 0 {
				sink ^= v[0] ^ v[len(v)-1]
			}
			continue
		}
		if child := b.Bucket(k); child != nil {
			if err := walkBucket(child, path+"/"+string(k), depth+1); err != nil {
				return err
			}
		}
	}
	_ = sink
	return nil
}

// consistencyCheck runs bbolt's tx.Check and drains it fully (its goroutine blocks
// until every error is received), returning the first problem.
func consistencyCheck(tx *bolt.Tx) error {
	var first error
	n := 0
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
		n++
	}
	if first != nil && n > 1 {
		return fmt.Errorf("%w (and %d more problems)", first, n-1)
	}
	return first
}

// openBoltRW reopens a validated file read-write, refusing if the path now names a
// different inode than the one validated.
func openBoltRW(path, what string, want fileID, ceiling int64) (*bolt.DB, error) {
	opener := noFollowOpener(what, ceiling, func(id fileID, _ int64) error {
		if id != want {
			return refuse(ErrUnsafeFile, "%s %s was replaced between validation and open; refusing it", what, path)
		}
		return nil
	})
	db, err := bolt.Open(path, fileMode, &bolt.Options{
		Timeout:      lockTimeout,
		OpenFile:     opener,
		FreelistType: bolt.FreelistMapType, // O(1) allocation as compaction frees pages
	})
	if err != nil {
		return nil, classifyOpenError(path, what, err)
	}
	return db, nil
}

// createBoltFile builds a new bbolt file under a temp name, lets init fill it in one
// transaction, and renames it into place (never over an existing file), so a crash
// leaves either no file or a complete one.
func createBoltFile(final string, init func(tx *bolt.Tx) error) error {
	tmp := tempPath(final)
	f, err := createExclusive(tmp)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	db, err := bolt.Open(tmp, fileMode, &bolt.Options{Timeout: lockTimeout, OpenFile: noFollowOpener("new db", 0, nil)})
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := db.Update(init); err != nil {
		db.Close()
		os.Remove(tmp)
		return fmt.Errorf("initialise %s: %w", tmp, err)
	}
	if err := db.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	return publish(tmp, final, renameNoReplace)
}
