package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// File names inside the data directory.
const (
	stateFileName       = "state.db"
	diagnosticsFileName = "diagnostics.db"
	markerFileName      = "storage-identity"
	lockFileName        = "daemon.lock"
)

// fileMode is the only mode a store file, marker or lock may have.
const fileMode os.FileMode = 0o600

// fileID identifies an inode, so a file validated read-only is provably the one
// reopened read-write.
type fileID struct{ dev, ino uint64 }

// ensureDir creates the data directory 0700 when absent and refuses a non-directory.
func ensureDir(dir string) error {
	if dir == "" {
		return errors.New("persistence: data dir is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat data dir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	return nil
}

// lexists reports whether path exists as any kind of directory entry (a dangling
// symlink counts: it is there, and it is refused later).
func lexists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
}

// checkEntry refuses, before anything is opened, a path that is a symlink or not a
// regular file (opening a FIFO would block).
func checkEntry(path, what string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refuse(ErrUnsafeFile, "%s %s is a symlink; refusing to follow it (file left untouched)", what, path)
	}
	if !fi.Mode().IsRegular() {
		return refuse(ErrUnsafeFile, "%s %s is not a regular file (%s); refusing it (file left untouched)", what, path, fi.Mode().Type())
	}
	return nil
}

// openNoFollow opens path without following a final symlink. O_NONBLOCK keeps a
// FIFO swapped in after checkEntry from blocking us; it is inert on regular files.
func openNoFollow(path, what string, flag int) (*os.File, error) {
	fd, err := unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(fileMode))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, refuse(ErrUnsafeFile, "%s %s is a symlink; refusing to follow it (file left untouched)", what, path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	// Clear O_NONBLOCK again so ordinary I/O semantics apply.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("open %s: clear nonblock: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkShape validates an opened file: regular, one link, mode exactly 0600 and, when
// ceiling > 0, not larger than it. It returns the inode identity and size.
func checkShape(f *os.File, what string, ceiling int64) (fileID, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, 0, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	path := f.Name()
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileID{}, 0, refuse(ErrUnsafeFile, "%s %s is not a regular file; refusing it (file left untouched)", what, path)
	}
	if st.Nlink != 1 {
		return fileID{}, 0, refuse(ErrUnsafeFile, "%s %s has %d hard links, want exactly 1; refusing it (file left untouched)", what, path, st.Nlink)
	}
	if perm := os.FileMode(st.Mode & 0o7777); perm != fileMode {
		return fileID{}, 0, refuse(ErrUnsafeFile, "%s %s has mode %04o, want 0600; refusing it (file left untouched)", what, path, uint32(perm))
	}
	if ceiling > 0 && st.Size > ceiling {
		return fileID{}, 0, refuse(ErrTooLarge, "%s %s is %d bytes, over the configured ceiling of %d bytes; refusing it (file left untouched)", what, path, st.Size, ceiling)
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, st.Size, nil
}

// openChecked opens an existing file read-only the way noFollowOpener does, after
// checkEntry; the caller closes it.
func openChecked(path, what string, ceiling int64) (f *os.File, id fileID, size int64, err error) {
	if err := checkEntry(path, what); err != nil {
		return nil, fileID{}, 0, err
	}
	f, err = noFollowOpener(what, ceiling, func(i fileID, n int64) error {
		id, size = i, n
		return nil
	})(path, os.O_RDONLY, 0)
	return f, id, size, err
}

// SyncDir makes a rename or create in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

// renameNoReplace publishes tmp as final, refusing to replace an existing final.
func renameNoReplace(tmp, final string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
	}
	return nil
}

// tempPath returns a unique sibling name for staging final.
func tempPath(final string) string {
	return filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".tmp-"+uuid.NewString())
}

// createExclusive creates a new file with mode exactly 0600 (whatever the umask),
// never following or replacing anything.
func createExclusive(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fileMode))
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	if err := unix.Fchmod(fd, uint32(fileMode)); err != nil {
		unix.Close(fd)
		os.Remove(path)
		return nil, &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// stageFile publishes data at final atomically: temp file + fsync + rename +
// directory fsync. With renameNoReplace it never goes over an existing file; with
// os.Rename (rename(2): it replaces the directory entry itself, never following a
// symlink) it replaces one. A crash leaves what was there or the whole new file.
func stageFile(final string, data []byte, rename func(tmp, final string) error) error {
	tmp := tempPath(final)
	f, err := createExclusive(tmp)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		err = fmt.Errorf("write %s: %w", tmp, err)
	} else if err = f.Sync(); err != nil {
		err = fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return publish(tmp, final, rename)
}

// publish renames the staged tmp to final and makes the rename durable; a failed
// rename removes tmp.
func publish(tmp, final string, rename func(tmp, final string) error) error {
	if err := rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(final))
}
