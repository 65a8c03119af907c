package persistence

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A read-only look at a data dir, for `berthctl doctor`, next to a running berthd.
//
// bbolt cannot open a file read-only while a writer has it: a read-only open takes
// a shared flock on state.db, which berthd's exclusive one refuses; and holding
// that shared flock while berthd starts would make berthd's own open time out. So
// OpenReadOnly takes no lock at all — neither daemon.lock nor bbolt's — and works
// on a private copy. A plain copy of a file being written can be torn; the copy is
// proven consistent instead: every bbolt commit ends by rewriting one of the two
// meta pages, and the pages reachable from the current meta are never overwritten
// until a later commit has replaced that meta (bbolt writes new versions to free
// pages; the pages a commit frees become reusable only by the commit after it). So
// when both meta pages read the same before and after the copy, and the copy holds
// those very bytes, no commit finished during the copy and the copy is exactly the
// committed transaction those meta pages name, whatever was being written into
// free pages meanwhile. A copy that sees a commit is discarded and taken again.

// Binding says what berthd's next Open would do about the installation identity.
type Binding string

const (
	BindingCurrent   Binding = "current"   // meta, marker and the data dir's location agree
	BindingBind      Binding = "bind"      // an earlier berthd's store: the location is recorded once
	BindingRekey     Binding = "rekey"     // found elsewhere than claimed (copy or move): a new installation_id
	BindingRepublish Binding = "republish" // a re-key was committed, the marker not yet rewritten
)

// ReadOnlyOptions configure OpenReadOnly.
type ReadOnlyOptions struct {
	Dir          string // data dir; never created
	MaxFileBytes int64  // state.db's size ceiling; 0 = 1 GiB
	TempDir      string // where the private copy is made; "" = os.TempDir()
	Attempts     int    // copies tried until one is consistent; 0 = 5
}

// ReadOnlyInfo reports what OpenReadOnly found.
type ReadOnlyInfo struct {
	Location         string  // the data dir's resolved location
	RecordedLocation string  // meta's installation_location ("" for an earlier berthd's store)
	Binding          Binding // what the next start would do about the identity
	Findings         []string
	Copies           int // copies taken until one was consistent
}

// afterCopyHook runs between a copy and the second read of the meta pages (tests:
// a commit there must make the copy count as torn).
var afterCopyHook func()

// errReadOnly refuses writes on a store opened with OpenReadOnly.
var errReadOnly = errors.New("store opened read-only (a private copy)")

// OpenReadOnly validates <Dir>/state.db the way Open does — the live file's shape
// (no symlink, one link, mode 0600, under the ceiling), its meta pages, a walk of
// every page and bbolt's consistency check, the schema, and its identity against
// the marker — and returns a Store over a consistent private copy: every read
// works, every write is refused, and Close removes the copy. It changes nothing in
// the data dir and takes no lock, so a running or starting berthd is not affected.
// Refusals are Open's, wrapping the same sentinels; a data dir with neither a
// marker nor state.db is ErrNoIdentity.
func OpenReadOnly(ctx context.Context, opts ReadOnlyOptions) (*Store, ReadOnlyInfo, error) {
	opts.MaxFileBytes = cmp.Or(max(opts.MaxFileBytes, 0), defaultMaxFileBytes)
	opts.Attempts = cmp.Or(max(opts.Attempts, 0), 5)
	fi, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, ReadOnlyInfo{}, fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, ReadOnlyInfo{}, fmt.Errorf("data dir %s is not a directory", opts.Dir)
	}
	location, err := resolveLocation(opts.Dir)
	if err != nil {
		return nil, ReadOnlyInfo{}, err
	}
	info := ReadOnlyInfo{Location: location}
	files, found, err := findStore(opts.Dir, "berthd refuses to start", "")
	if err != nil {
		return nil, info, err
	}
	if !found {
		return nil, info, refuse(ErrNoIdentity, "%s has no storage identity (%s) and no state.db yet: berthd creates them at its first start outside production_mode; in production run berthd -initialize-storage-identity new", opts.Dir, markerFileName)
	}
	marker, err := readMarker(files.marker)
	if err != nil {
		return nil, info, err
	}

	copyPath, cleanup, err := privateCopy(ctx, files.state, opts, &info.Copies)
	if err != nil {
		return nil, info, err
	}
	ok := false
	defer func() {
		if !ok {
			cleanup()
		}
	}()

	m0, m1, found, _, err := readMetaPages(copyPath, "state.db", opts.MaxFileBytes)
	if err != nil {
		return nil, info, err
	}
	fallback := ""
	if found {
		var findings []string
		fallback, findings = judgeMetaPages(files.state, m0, m1)
		info.Findings = append(info.Findings, findings...)
	}
	st, action, _, err := planOpen(copyPath, files, marker, location, opts.MaxFileBytes)
	if err != nil {
		return nil, info, withFinding(err, fallback)
	}
	info.RecordedLocation = st.location
	info.Binding = map[identityAction]Binding{identityCurrent: BindingCurrent, identityBind: BindingBind,
		identityRekey: BindingRekey, identityRepublish: BindingRepublish}[action]

	db, err := bolt.Open(copyPath, fileMode, &bolt.Options{ReadOnly: true, Timeout: lockTimeout,
		OpenFile: noFollowOpener("state.db", opts.MaxFileBytes, nil)})
	if err != nil {
		return nil, info, classifyOpenError(files.state, "state.db", err)
	}
	ok = true
	s := storeOver(db, files, Options{Dir: opts.Dir, MaxFileBytes: opts.MaxFileBytes}.withDefaults(), location, st.id, info.Findings)
	s.readOnly, s.cleanup = true, cleanup
	return s, info, nil
}

// privateCopy makes a consistent copy of statePath in a fresh temp directory,
// counting the copies taken; cleanup removes the directory (a failed privateCopy
// has already run it).
func privateCopy(ctx context.Context, statePath string, opts ReadOnlyOptions, copies *int) (copyPath string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp(opts.TempDir, "berth-state-copy-")
	if err != nil {
		return "", nil, fmt.Errorf("make a private copy of %s: %w", statePath, err)
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	copyPath = filepath.Join(tmp, stateFileName)
	if *copies, err = copyUntilConsistent(ctx, statePath, copyPath, opts); err != nil {
		cleanup()
		return "", nil, err
	}
	return copyPath, cleanup, nil
}

// copyUntilConsistent copies statePath to copyPath until a copy is consistent (see
// copyConsistent), at most opts.Attempts times, backing off between tries; it
// returns the number of copies taken.
func copyUntilConsistent(ctx context.Context, statePath, copyPath string, opts ReadOnlyOptions) (int, error) {
	for copies := 1; ; copies++ {
		stable, err := copyConsistent(ctx, statePath, copyPath, opts.MaxFileBytes)
		if err != nil || stable {
			return copies, err
		}
		if err := os.Remove(copyPath); err != nil {
			return copies, fmt.Errorf("discard the copy of %s: %w", statePath, err)
		}
		if copies == opts.Attempts {
			return copies, fmt.Errorf("state.db %s: a commit landed during each of %d copies (berthd is writing steadily); try again", statePath, copies)
		}
		select {
		case <-ctx.Done():
			return copies, fmt.Errorf("copy %s: %w", statePath, ctx.Err())
		case <-time.After(time.Duration(copies) * 20 * time.Millisecond):
		}
	}
}

// copyConsistent copies src to dst (created 0600, never replacing anything) and
// reports whether the copy is consistent: src's meta pages were the same bytes
// before and after, and the copy holds them. Shape refusals are the live file's.
func copyConsistent(ctx context.Context, src, dst string, ceiling int64) (bool, error) {
	f, _, _, err := openChecked(src, "state.db", ceiling)
	if err != nil {
		return false, err
	}
	defer f.Close()
	before, err := metaRegion(f)
	if err != nil {
		return false, err
	}
	out, err := createExclusive(dst)
	if err != nil {
		return false, err
	}
	_, err = io.Copy(out, io.LimitReader(&contextReader{ctx: ctx, r: io.NewSectionReader(f, 0, 1<<62)}, ceiling+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if h := afterCopyHook; h != nil {
		h()
	}
	after, err := metaRegion(f)
	if err != nil {
		return false, err
	}
	cf, err := os.Open(dst)
	if err != nil {
		return false, fmt.Errorf("read back %s: %w", dst, err)
	}
	defer cf.Close()
	copied := make([]byte, len(before))
	n, err := io.ReadFull(cf, copied)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read back %s: %w", dst, err)
	}
	return bytes.Equal(before, after) && bytes.Equal(before, copied[:n]), nil
}

// metaRegion reads both meta pages of the bbolt file f (the first two pages of
// its page size; the first two probe sizes when no meta tells the size: then the
// file is refused as corrupt anyway).
func metaRegion(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	read := pageReader(f, f.Name())
	head, err := read(0)
	if err != nil {
		return nil, err
	}
	ps, err := findPageSize(parseMeta(0, head), fi.Size(), read)
	if err != nil {
		return nil, err
	}
	if ps == 0 {
		ps = metaReadBytes
	}
	buf := make([]byte, 2*ps)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return buf[:n], nil
}

// contextReader stops a long copy when its context ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
