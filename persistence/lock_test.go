package persistence

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// helperCmd re-executes the test binary in a helper mode on dir.
func helperCmd(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+dir)
	return cmd
}

func TestAcquireLock_HeldByAnotherProcess_SecondDaemonRefusedWithMessage(t *testing.T) {
	dir := t.TempDir()
	holder := helperCmd(t, "hold-lock", dir)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q (%v); stderr: %s", line, err, holderErr.String())
	}

	// In this process.
	want := "another berthd owns " + dir
	l, err := AcquireLock(dir)
	if err == nil {
		l.Release()
		t.Fatal("second AcquireLock succeeded while another process holds the lock")
	}
	if !errors.Is(err, ErrLocked) || err.Error() != want {
		t.Fatalf("AcquireLock = %q (ErrLocked: %v), want exactly %q", err, errors.Is(err, ErrLocked), want)
	}

	// A second "daemon" process exits 1 with that line.
	second := helperCmd(t, "try-lock", dir)
	var out, errOut bytes.Buffer
	second.Stdout, second.Stderr = &out, &errOut
	err = second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second daemon: %v, want exit status 1", err)
	}
	if got := errOut.String(); got != want+"\n" {
		t.Fatalf("second daemon stderr = %q, want %q", got, want+"\n")
	}

	// Releasing (the holder exits cleanly) lets another acquire.
	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v; stderr: %s", err, holderErr.String())
	}
	l, err = AcquireLock(dir)
	if err != nil {
		t.Fatalf("AcquireLock after release: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireLock_ReleaseThenReacquire_InProcess(t *testing.T) {
	dir := t.TempDir()
	l1, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock in the same process = %v, want ErrLocked", err)
	}
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(); err != nil {
		t.Fatalf("double release: %v", err)
	}
	l2, err := AcquireLock(dir)
	if err != nil {
		t.Fatalf("reacquire: %v", err)
	}
	defer l2.Release()
	pid, err := os.ReadFile(filepath.Join(dir, lockFileName))
	if err != nil || strings.TrimSpace(string(pid)) == "" {
		t.Fatalf("lock file pid = %q, %v", pid, err)
	}
	fi, err := os.Stat(filepath.Join(dir, lockFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file mode = %v, %v", fi.Mode(), err)
	}
}
