package persistence

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check passes on an open diagnostics.db and fails once the file berthd opened
// is no longer the one at its path (moved away, replaced) or the store is
// closed: /health then says unhealthy instead of losing captures silently.
func TestDiagnosticsCheck_MovedReplacedOrClosed_Unhealthy(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDiagnostics(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Check(); err != nil {
		t.Fatalf("a fresh diagnostics.db is unhealthy: %v", err)
	}
	path, moved := d.Path(), filepath.Join(dir, "moved.db")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("moved away: %v", err)
	}
	if err := os.WriteFile(path, []byte("not bbolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "no longer the file berthd opened") {
		t.Fatalf("replaced: %v", err)
	}
	if err := os.Rename(moved, path); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil {
		t.Fatalf("back in place: %v", err)
	}
	d.Close()
	if err := d.Check(); err == nil {
		t.Fatal("a closed diagnostics.db is healthy")
	}
}
