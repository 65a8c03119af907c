package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// markerMaxBytes bounds how much of a marker file is read; a real one is ~150 bytes.
const markerMaxBytes = 64 << 10

// Identity is the storage identity: the marker file's content and state.db's meta.
// StorageID is sent in every callback as backend_storage_id.
type Identity struct {
	StorageID      string    `json:"storage_id"`
	InstallationID string    `json:"installation_id"`
	CreatedAt      time.Time `json:"created_at"`
}

// newIdentity mints a fresh identity with two UUIDv4s (uuid.NewString, as tempPath
// does on the same paths). Round(0) drops the monotonic reading so the value
// round-trips through JSON.
func newIdentity(now time.Time) Identity {
	return Identity{StorageID: uuid.NewString(), InstallationID: uuid.NewString(), CreatedAt: now.UTC().Round(0)}
}

// validUUIDv4 accepts only the canonical lower-case form of a version-4 UUID.
func validUUIDv4(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.Version() == 4 && u.String() == s
}

func (id Identity) validate() error {
	if !validUUIDv4(id.StorageID) {
		return fmt.Errorf("storage_id %q is not a canonical UUIDv4", id.StorageID)
	}
	if !validUUIDv4(id.InstallationID) {
		return fmt.Errorf("installation_id %q is not a canonical UUIDv4", id.InstallationID)
	}
	if id.CreatedAt.IsZero() {
		return errors.New("created_at is missing")
	}
	return nil
}

// readMarker reads and validates <dir>/storage-identity without following a symlink.
func readMarker(path string) (Identity, error) {
	f, _, _, err := openChecked(path, "storage identity marker", markerMaxBytes)
	if err != nil {
		return Identity{}, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, markerMaxBytes+1))
	if err != nil {
		return Identity{}, fmt.Errorf("read storage identity marker %s: %w", path, err)
	}
	var id Identity
	if err := json.Unmarshal(raw, &id); err != nil {
		return Identity{}, refuseCause(ErrCorrupt, err, "storage identity marker %s is not valid JSON (%v); refusing to start (file left untouched)", path, err)
	}
	if err := id.validate(); err != nil {
		return Identity{}, refuseCause(ErrCorrupt, err, "storage identity marker %s is invalid: %v; refusing to start (file left untouched)", path, err)
	}
	return id, nil
}

// publishMarker publishes the marker atomically (stageFile): with renameNoReplace
// for a new store, with os.Rename over the old one after a re-key.
func publishMarker(path string, id Identity, rename func(tmp, final string) error) error {
	raw, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return fmt.Errorf("encode storage identity: %w", err)
	}
	return stageFile(path, append(raw, '\n'), rename)
}

// InitializeIdentity implements `berthd -initialize-storage-identity new`: it mints a
// storage identity and creates state.db (meta filled) and then the marker. It refuses
// with ErrIdentityExists when either already exists. The caller holds the daemon lock.
func InitializeIdentity(opts Options) (Identity, error) { return InitializeIdentityWith(opts, Write{}) }

// InitializeIdentityWith is InitializeIdentity with a first write — a takeover's
// adoption — committed in the very transaction that creates state.db: the
// store appears whole, before its marker, or not at all.
func InitializeIdentityWith(opts Options, first Write) (Identity, error) {
	opts = opts.withDefaults()
	plan, err := encodeWrite(first, opts.Now())
	if err != nil {
		return Identity{}, err
	}
	if err := ensureDir(opts.Dir); err != nil {
		return Identity{}, err
	}
	location, err := resolveLocation(opts.Dir)
	if err != nil {
		return Identity{}, err
	}
	files := filesIn(opts.Dir)
	for _, p := range []string{files.marker, files.state} {
		exists, err := lexists(p)
		if err != nil {
			return Identity{}, err
		}
		if exists {
			return Identity{}, refuse(ErrIdentityExists, "%s already exists; refusing to initialise a new storage identity over an existing store (nothing changed)", p)
		}
	}
	return createStore(opts, files, location, plan)
}

// createStore creates state.db (staged under a temp name, then renamed into place),
// its installation id claimed by location, and then the marker. The marker is published last: it is what says "this store is
// initialised". If publishing it fails, the fresh, empty state.db is removed again.
func createStore(opts Options, files storeFiles, location string, first writePlan) (Identity, error) {
	id := newIdentity(opts.Now())
	if err := createBoltFile(files.state, func(tx *bolt.Tx) error {
		if err := initStateTx(tx, id, location); err != nil {
			return err
		}
		return first.apply(tx, &Committed{LastSeq: map[string]uint64{}})
	}); err != nil {
		return Identity{}, err
	}
	if err := publishMarker(files.marker, id, renameNoReplace); err != nil {
		if rmErr := os.Remove(files.state); rmErr == nil {
			_ = SyncDir(opts.Dir)
		}
		return Identity{}, fmt.Errorf("publish storage identity marker %s: %w", files.marker, err)
	}
	return id, nil
}
