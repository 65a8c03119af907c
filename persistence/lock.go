package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Lock is the exclusive flock on <dir>/daemon.lock that makes one berthd the sole
// owner of a data directory. The kernel drops it when the process dies, however it dies.
type Lock struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// AcquireLock takes flock(LOCK_EX|LOCK_NB) on <dir>/daemon.lock, creating dir (0700)
// and the file (0600) when absent. When another process (or another Lock in this
// one) holds it, the error wraps ErrLocked and reads exactly "another berthd owns <dir>".
func AcquireLock(dir string) (*Lock, error) {
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockFileName)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fileMode))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, refuse(ErrUnsafeFile, "lock file %s is a symlink; refusing to follow it", path)
		}
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, refuse(ErrLocked, "another berthd owns %s", dir)
		}
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	// The pid is for operators only; the flock is the authority, so failing to
	// record it is not an error.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: path}, nil
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release drops the lock. The file stays: deleting it would let two processes
// lock two different inodes under the same name.
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	uerr := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	cerr := f.Close()
	if uerr != nil {
		return fmt.Errorf("unlock %s: %w", l.path, uerr)
	}
	if cerr != nil {
		return fmt.Errorf("close %s: %w", l.path, cerr)
	}
	return nil
}
