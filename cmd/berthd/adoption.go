package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/persistence/fredv013"
)

// loadAdoption is the takeover a data dir was made by (nil: it was not).
func loadAdoption(store *persistence.Store) (*takeover.Record, error) {
	got, err := store.Load(takeover.RecordStream)
	if err != nil {
		return nil, fmt.Errorf("adoption record: %w", err)
	}
	if len(got.Events) == 0 {
		return nil, nil
	}
	if len(got.Events) != 1 || got.Events[0].Type != takeover.EvRecorded {
		return nil, fmt.Errorf("adoption record: %d events, want one %s", len(got.Events), takeover.EvRecorded)
	}
	rec := new(takeover.Record)
	if err := json.Unmarshal(got.Events[0].Data, rec); err != nil {
		return nil, fmt.Errorf("adoption record: %w", err)
	}
	return rec, nil
}

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
