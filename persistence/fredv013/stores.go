// Package fredv013 reads the four bbolt files fred v0.13's docker backend keeps
// — callbacks, diagnostics, releases, retention — strictly and read-only, for
// the takeover of a fred host (the preflight and the adoption). Nothing here
// writes: each file is opened with bbolt's ReadOnly, which takes a shared flock
// that fred's exclusive one refuses, so a file that cannot be opened within the
// timeout is held by a running fred.
package fredv013

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-dev/berth/messages"
)

// The files, as fred names them by default, and the one bucket each holds.
const (
	CallbacksFile   = "callbacks.db"
	DiagnosticsFile = "diagnostics.db"
	ReleasesFile    = "releases.db"
	RetentionFile   = "retention.db"
)

var buckets = map[string]string{
	CallbacksFile:   "pending_callbacks",
	DiagnosticsFile: "failure_diagnostics",
	ReleasesFile:    "releases",
	RetentionFile:   "retention",
}

// ErrLocked: a file is held by another process (fred runs).
var ErrLocked = errors.New("held by a running process")

// ErrMalformed: a file holds what fred v0.13 never wrote (an unknown bucket,
// field or key, a row that does not decode).
var ErrMalformed = errors.New("not fred v0.13's")

// Callback is one undelivered callback (one row per lease: a newer one replaced
// an older).
type Callback struct {
	LeaseUUID   string    `json:"lease_uuid"`
	CallbackURL string    `json:"callback_url"`
	Success     bool      `json:"success"`
	Status      string    `json:"status"` // success | failed | deprovisioned
	Backend     string    `json:"backend"`
	Error       string    `json:"error,omitempty"`
	Retained    bool      `json:"retained,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Diagnostic is a lease's last failure capture.
type Diagnostic struct {
	LeaseUUID    string            `json:"lease_uuid"`
	ProviderUUID string            `json:"provider_uuid"`
	Tenant       string            `json:"tenant"`
	Error        string            `json:"error,omitempty"`
	Reason       string            `json:"reason,omitempty"`
	Message      string            `json:"message,omitempty"`
	Logs         map[string]string `json:"logs,omitempty"` // "svc/idx" → text
	FailCount    int               `json:"fail_count"`
	CreatedAt    time.Time         `json:"created_at"`
}

// Release statuses fred writes.
const (
	ReleaseDeploying  = "deploying"
	ReleaseActive     = "active"
	ReleaseSuperseded = "superseded"
	ReleaseFailed     = "failed"
)

// Release is one row of a lease's release history.
type Release struct {
	Version   int       `json:"version"`
	Manifest  []byte    `json:"manifest"` // the tenant payload as sent
	Image     string    `json:"image"`    // "stack"
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Error     string    `json:"error,omitempty"` // legacy
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// Retention statuses fred writes.
const (
	RetentionActive    = "active"
	RetentionRestoring = "restoring"
	RetentionReaping   = "reaping"
)

// Retention is a closed lease's retained volumes.
type Retention struct {
	OriginalLeaseUUID   string               `json:"original_lease_uuid"`
	Tenant              string               `json:"tenant"`
	Partition           string               `json:"partition,omitempty"`
	ProviderUUID        string               `json:"provider_uuid"`
	Items               []messages.LeaseItem `json:"items"`
	StackManifest       json.RawMessage      `json:"stack_manifest"` // parsed by fred, not the bytes sent
	CallbackURL         string               `json:"callback_url"`
	RetainedVolumeNames []string             `json:"retained_volume_names"`
	Status              string               `json:"status"`
	NewLeaseUUID        string               `json:"new_lease_uuid,omitempty"`
	Generation          uint64               `json:"generation"`
	CreatedAt           time.Time            `json:"created_at"`
	RestoringSince      time.Time            `json:"restoring_since"`
	ReapingSince        time.Time            `json:"reaping_since"`
}

// Stores is everything fred's four files hold, keyed by lease UUID.
type Stores struct {
	Callbacks   map[string]Callback
	Diagnostics map[string]Diagnostic
	Releases    map[string][]Release
	Retentions  map[string]Retention
}

// Read opens each of fred's four files in dir read-only (waiting at most
// timeout for fred's lock) and decodes every row strictly.
func Read(dir string, timeout time.Duration) (*Stores, error) {
	s := &Stores{Callbacks: map[string]Callback{}, Diagnostics: map[string]Diagnostic{},
		Releases: map[string][]Release{}, Retentions: map[string]Retention{}}
	steps := []struct {
		file string
		row  func(key string, v []byte) error
	}{
		{CallbacksFile, func(k string, v []byte) error {
			return decodeInto(s.Callbacks, k, v, func(c Callback) string { return c.LeaseUUID })
		}},
		{DiagnosticsFile, func(k string, v []byte) error {
			return decodeInto(s.Diagnostics, k, v, func(d Diagnostic) string { return d.LeaseUUID })
		}},
		{ReleasesFile, func(k string, v []byte) error {
			return decodeInto(s.Releases, k, v, func([]Release) string { return k })
		}},
		{RetentionFile, func(k string, v []byte) error {
			return decodeInto(s.Retentions, k, v, func(r Retention) string { return r.OriginalLeaseUUID })
		}},
	}
	for _, st := range steps {
		if err := readFile(filepath.Join(dir, st.file), buckets[st.file], timeout, st.row); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// readFile walks the one bucket of a fred file, refusing any other.
func readFile(path, bucket string, timeout time.Duration, row func(key string, v []byte) error) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("fred v0.13's %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return fmt.Errorf("fred v0.13's %s: %w (fred must be stopped)", path, ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("fred v0.13's %s: %w: %w", path, ErrMalformed, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) != bucket {
				return fmt.Errorf("fred v0.13's %s: %w: bucket %q (only %q)", path, ErrMalformed, name, bucket)
			}
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					return fmt.Errorf("fred v0.13's %s: %w: nested bucket %q", path, ErrMalformed, k)
				}
				if err := row(string(k), v); err != nil {
					return fmt.Errorf("fred v0.13's %s, row %q: %w: %w", path, k, ErrMalformed, err)
				}
				return nil
			})
		})
	})
}

// decodeInto decodes v strictly (no unknown field, nothing after it) and files it
// under key, which must be the lease the row names.
func decodeInto[T any](m map[string]T, key string, v []byte, lease func(T) string) error {
	var row T
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&row); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	if got := lease(row); got != key {
		return fmt.Errorf("the row names lease %q", got)
	}
	m[key] = row
	return nil
}
