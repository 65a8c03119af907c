package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/persistence/fredv013"
)

// lockOutFred holds a shared lock on fred v0.13's callbacks.db for as long as
// berthd runs: fred opens it exclusively (bbolt, 5 s timeout) before anything
// else, so a fred started by mistake on the adopted host exits without touching
// Docker — it would take berthd's containers as its own and destroy its volumes.
// A fred that holds the file now runs: berthd refuses to start. Fred's files
// gone (the operator retired them) leave nothing to guard.
func lockOutFred(rec *takeover.Record) (release func(), err error) {
	path := filepath.Join(rec.FredDir, fredv013.CallbacksFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock out fred v0.13: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("fred v0.13 holds %s: it runs on the host berthd adopted; stop and mask it (two daemons on one host destroy tenants' data): %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// keepCaptures writes fred's failure diagnostics, as berthd's, into
// diagnostics.db — before the state, so a finished adoption has them all; an
// interrupted one is rerun over a fresh data dir (a copy written twice is
// harmless: the latest capture is the one read).
func keepCaptures(opts persistence.Options, captures []lease.Capture) error {
	if len(captures) == 0 {
		return nil
	}
	diag, err := persistence.OpenDiagnostics(opts)
	if err != nil {
		return err
	}
	for _, c := range captures {
		blob, err := json.Marshal(c)
		if err == nil {
			err = diag.Put(c.Lease, c.At, blob)
		}
		if err != nil {
			_ = diag.Close()
			return fmt.Errorf("lease %s: %w", c.Lease, err)
		}
	}
	return diag.Close()
}
