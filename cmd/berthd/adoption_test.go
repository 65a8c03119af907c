package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
)

// While berthd holds its lock, fred's own open of callbacks.db (exclusive, as
// fred v0.13 opens it) times out; a running fred's lock makes berthd refuse.
func TestLockOutFred_FredCannotOpenItsStoreWhileBerthdRuns_AndARunningFredRefusesBerthd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "callbacks.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	rec := &takeover.Record{FredDir: dir}
	release, err := lockOutFred(rec)
	if err != nil {
		t.Fatal(err)
	}
	if fred, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 300 * time.Millisecond}); err == nil {
		_ = fred.Close()
		t.Fatal("fred opened callbacks.db while berthd held it")
	}
	release()
	fred, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("fred after berthd stopped: %v", err)
	}
	defer fred.Close()
	if _, err := lockOutFred(rec); err == nil || !strings.Contains(err.Error(), "fred v0.13 holds") {
		t.Fatalf("berthd beside a running fred: %v", err)
	}
	if release, err := lockOutFred(&takeover.Record{FredDir: filepath.Join(dir, "retired")}); err != nil {
		t.Fatalf("fred's files retired: %v", err)
	} else {
		release()
	}
	_ = os.Remove(path)
}
