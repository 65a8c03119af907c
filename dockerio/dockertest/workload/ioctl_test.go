package main

import (
	"bytes"
	"strings"
	"testing"
)

// On a directory that is no btrfs, every btrfs ioctl reaches the filesystem
// and fails there (not with the seccomp filter's EPERM); FIONREAD works and
// TCGETS on a pipe is ENOTTY. The engine's seccomp test runs it in a container.
func TestIoctl_ReportsOneLinePerCall(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"ioctl", t.TempDir()}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	names := []string{"SUBVOL_CREATE", "SUBVOL_CREATE_V2", "SNAP_CREATE", "SNAP_CREATE_V2", "SUBVOL_CREATE_HIGHBITS", "FIONREAD", "TCGETS"}
	if len(lines) != len(names) {
		t.Fatalf("output %q, want one line for each of %v", out.String(), names)
	}
	for i, name := range names {
		if !strings.HasPrefix(lines[i], name+" ") || strings.Contains(lines[i], "EPERM") {
			t.Errorf("line %d = %q, want %s without EPERM", i, lines[i], name)
		}
	}
	if lines[5] != "FIONREAD ok" || !strings.HasPrefix(lines[6], "TCGETS ENOTTY") {
		t.Errorf("ordinary ioctls: %q, %q", lines[5], lines[6])
	}
	if code := run([]string{"ioctl"}, &out, &errOut); code != 2 {
		t.Errorf("ioctl without DIR: exit %d, want 2", code)
	}
}
