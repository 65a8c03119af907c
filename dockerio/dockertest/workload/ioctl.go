package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// btrfs ioctl numbers (linux/btrfs.h): _IOW(0x94, nr, 4096-byte args). Both
// argument structs are 4096 bytes, so the number is the same on every ABI.
const (
	btrfsIocSnapCreate     = 0x50009401
	btrfsIocSubvolCreate   = 0x5000940e
	btrfsIocSnapCreateV2   = 0x50009417
	btrfsIocSubvolCreateV2 = 0x50009418
	fionread               = 0x541b
	tcgets                 = 0x5401
)

// btrfsVolArgs is struct btrfs_ioctl_vol_args (and, for the fields used here,
// btrfs_ioctl_vol_args_v2: fd, then the name at offset 56 in v2).
type btrfsVolArgs [4096]byte

// runIoctl is `workload ioctl DIR`: it tries, on the directory DIR, each btrfs
// ioctl that creates a subvolume or snapshot (a tenant's way out of its volume's
// quota), then an ordinary ioctl (FIONREAD on a pipe), and prints one line per
// call: "<name> ok" or "<name> <errno name> (<errno number>)"; then TCGETS on
// the same pipe, which the filter lets through to the kernel's ENOTTY. Exit 0 when every
// call was made, whatever it answered; 1 when DIR cannot be opened.
func runIoctl(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: workload ioctl DIR")
		return 2
	}
	dir, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "workload ioctl: %v\n", err)
		return 1
	}
	defer dir.Close()
	calls := []struct {
		name    string
		req     uintptr
		nameOff int
	}{
		{"SUBVOL_CREATE", btrfsIocSubvolCreate, 8},
		{"SUBVOL_CREATE_V2", btrfsIocSubvolCreateV2, 56},
		{"SNAP_CREATE", btrfsIocSnapCreate, 8},
		{"SNAP_CREATE_V2", btrfsIocSnapCreateV2, 56},
	}
	for i, c := range calls {
		var a btrfsVolArgs
		// fd (the snapshot source) is the directory itself: only the filter's
		// answer matters, not whether btrfs would agree.
		*(*int64)(unsafe.Pointer(&a[0])) = int64(dir.Fd())
		copy(a[c.nameOff:], fmt.Sprintf("berth-escape-%d", i))
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, dir.Fd(), c.req, uintptr(unsafe.Pointer(&a)))
		reportErrno(stdout, c.name, errno)
	}
	// The same number with high bits set in the 64-bit register: the kernel
	// reads an int, so a filter comparing all 64 bits would let it through.
	var a btrfsVolArgs
	copy(a[8:], "berth-escape-high")
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, dir.Fd(), 0xffffffff00000000|btrfsIocSubvolCreate, uintptr(unsafe.Pointer(&a)))
	reportErrno(stdout, "SUBVOL_CREATE_HIGHBITS", errno)
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "workload ioctl: %v\n", err)
		return 1
	}
	defer r.Close()
	defer w.Close()
	_, _ = w.Write([]byte("abc"))
	var n int32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), fionread, uintptr(unsafe.Pointer(&n)))
	if errno == 0 && n != 3 {
		errno = syscall.EIO // answered, but wrongly
	}
	reportErrno(stdout, "FIONREAD", errno)
	var termios [64]byte
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), tcgets, uintptr(unsafe.Pointer(&termios)))
	reportErrno(stdout, "TCGETS", errno)
	return 0
}

func reportErrno(w io.Writer, name string, errno syscall.Errno) {
	if errno == 0 {
		fmt.Fprintf(w, "%s ok\n", name)
		return
	}
	errName, ok := errnoNames[errno]
	if !ok {
		errName = errno.Error()
	}
	fmt.Fprintf(w, "%s %s (%d)\n", name, errName, int(errno))
}

// errnoNames are the answers the tests look for by name.
var errnoNames = map[syscall.Errno]string{syscall.EPERM: "EPERM", syscall.EACCES: "EACCES", syscall.ENOTTY: "ENOTTY",
	syscall.EEXIST: "EEXIST", syscall.EINVAL: "EINVAL", syscall.EROFS: "EROFS"}
