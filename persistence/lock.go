package persistence

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// LockHolder says who holds a data dir's daemon.lock, for operators.
type LockHolder struct {
	Path string // <dir>/daemon.lock
	// Held: the kernel lists an flock on the file (/proc/locks). A lock file
	// nobody holds is normal: it stays after berthd stops.
	Held bool
	PID  int    // the holder's pid as the kernel reports it (0 when not held or not visible)
	Comm string // the holder's command name (/proc/<pid>/comm), "" when unreadable
	// RecordedPID is the pid berthd wrote into the file when it took the lock
	// (informational: a stale one stays after the process is gone).
	RecordedPID int
}

// ReadLockHolder finds out who holds <dir>/daemon.lock without taking it: even a
// try-lock would, for an instant, make a starting berthd fail "another berthd
// owns …". It reads the kernel's lock table instead. A missing lock file is not
// an error: no berthd has run on the dir yet.
func ReadLockHolder(dir string) (LockHolder, error) {
	h := LockHolder{Path: filepath.Join(dir, lockFileName)}
	var st unix.Stat_t
	if err := unix.Lstat(h.Path, &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return h, nil
		}
		return h, fmt.Errorf("stat %s: %w", h.Path, err)
	}
	if raw, err := os.ReadFile(h.Path); err == nil {
		h.RecordedPID, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		return h, fmt.Errorf("read the kernel's lock table: %w", err)
	}
	dev := fmt.Sprintf("%02x:%02x", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
	h.PID, h.Held = flockHolder(table, dev, st.Ino)
	if h.Held && h.PID > 0 {
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.PID)); err == nil {
			h.Comm = strings.TrimSpace(string(comm))
		}
	}
	return h, nil
}

// flockHolder scans /proc/locks for a granted FLOCK on inode ino. Lines read
// "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF" (waiters carry "->" after the
// id). The device is matched when it agrees; on btrfs stat reports a subvolume's
// anonymous device while the lock table names the filesystem's, so an inode match
// on another device is taken when no line matches both.
func flockHolder(table []byte, dev string, ino uint64) (pid int, held bool) {
	want := strconv.FormatUint(ino, 10)
	inodeOnly := -1
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 || id[2] != want {
			continue
		}
		p, _ := strconv.Atoi(f[4])
		if id[0]+":"+id[1] == dev {
			return p, true
		}
		if inodeOnly < 0 {
			inodeOnly = p
		}
	}
	if inodeOnly >= 0 {
		return inodeOnly, true
	}
	return 0, false
}
