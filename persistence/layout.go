package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout version written to meta.schema_version. A store with a
// newer version is refused (ErrNewerSchema) rather than misread.
const SchemaVersion = 1

// Top-level buckets of state.db.
var (
	bucketMeta     = []byte("meta")
	bucketJournal  = []byte("journal")  // journal/<stream>: u64 seq → envelope
	bucketSnapshot = []byte("snapshot") // snapshot/<stream>: "latest" → snapshot
	bucketOutbox   = []byte("outbox")   // outbox/<lease>: u64 global seq → row; its own sequence is the global counter
	bucketRetired  = []byte("retired")  // retired: <stream> → when it was deleted (RetireStream); a name once used stays used
)

// meta keys.
var (
	metaSchemaVersion  = []byte("schema_version")
	metaStorageID      = []byte("storage_id")
	metaInstallationID = []byte("installation_id")
	metaCreatedAt      = []byte("created_at")
	// metaLocation is the resolved data dir that claimed installation_id. A store
	// found anywhere else (a copy, a move) is re-keyed with a fresh installation_id.
	metaLocation = []byte("installation_location")
	// Set by a re-key, for the operator: the identity and location it replaced.
	metaPreviousInstallationID = []byte("previous_installation_id")
	metaPreviousLocation       = []byte("previous_installation_location")
	metaRekeyedAt              = []byte("installation_rekeyed_at")
)

// nested returns root/<name>, or nil.
func nested(tx *bolt.Tx, root []byte, name string) *bolt.Bucket {
	r := tx.Bucket(root)
	if r == nil {
		return nil
	}
	return r.Bucket([]byte(name))
}

// deleteBucket deletes parent/<name>; one already gone is no error.
func deleteBucket(parent *bolt.Bucket, name []byte) error {
	if err := parent.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
		return err
	}
	return nil
}

// snapshotKey is the single key inside snapshot/<stream>.
var snapshotKey = []byte("latest")

// maxNameBytes bounds stream and lease names (they are bbolt bucket keys).
const maxNameBytes = 200

// validName checks a stream or lease name: non-empty, ≤ 200 bytes, no NUL.
func validName(kind, name string) error {
	switch {
	case name == "":
		return badInput("%s name is empty", kind)
	case len(name) > maxNameBytes:
		return badInput("%s name is %d bytes, limit %d", kind, len(name), maxNameBytes)
	case bytes.IndexByte([]byte(name), 0) >= 0:
		return badInput("%s name %q contains NUL", kind, name)
	}
	return nil
}

func u64key(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// keyU64 decodes an 8-byte big-endian key; ok is false for any other length.
func keyU64(k []byte) (uint64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

// initStateTx writes a fresh state.db layout: meta (schema, identity, the location
// that claims the installation id) and the empty journal, snapshot and outbox roots.
func initStateTx(tx *bolt.Tx, id Identity, location string) error {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return fmt.Errorf("create meta bucket: %w", err)
	}
	for _, kv := range [][2][]byte{
		{metaSchemaVersion, []byte(strconv.Itoa(SchemaVersion))},
		{metaStorageID, []byte(id.StorageID)},
		{metaInstallationID, []byte(id.InstallationID)},
		{metaCreatedAt, []byte(id.CreatedAt.UTC().Format(time.RFC3339Nano))},
		{metaLocation, []byte(location)},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return fmt.Errorf("write meta %s: %w", kv[0], err)
		}
	}
	for _, name := range [][]byte{bucketJournal, bucketSnapshot, bucketOutbox} {
		if _, err := tx.CreateBucket(name); err != nil {
			return fmt.Errorf("create %s bucket: %w", name, err)
		}
	}
	return nil
}

// readSchema reads meta.schema_version, refusing a missing/garbled value as corrupt
// and a newer one as ErrNewerSchema.
func readSchema(meta *bolt.Bucket, what, path string) error {
	raw := meta.Get(metaSchemaVersion)
	if raw == nil {
		return refuse(ErrCorrupt, "%s %s has no meta.schema_version; refusing to start (file left untouched)", what, path)
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return refuse(ErrCorrupt, "%s %s has an invalid meta.schema_version %q; refusing to start (file left untouched)", what, path, raw)
	}
	if v > SchemaVersion {
		return refuse(ErrNewerSchema, "%s %s has schema version %d, newer than this berthd supports (%d); refusing to start (file left untouched)", what, path, v, SchemaVersion)
	}
	return nil
}

// readMetaIdentity reads the identity recorded in meta.
func readMetaIdentity(meta *bolt.Bucket, path string) (Identity, error) {
	id := Identity{
		StorageID:      string(meta.Get(metaStorageID)),
		InstallationID: string(meta.Get(metaInstallationID)),
	}
	if raw := meta.Get(metaCreatedAt); raw != nil {
		t, err := time.Parse(time.RFC3339Nano, string(raw))
		if err != nil {
			return Identity{}, refuse(ErrCorrupt, "state.db %s has an invalid meta.created_at %q; refusing to start (file left untouched)", path, raw)
		}
		id.CreatedAt = t
	}
	if err := id.validate(); err != nil {
		return Identity{}, refuseCause(ErrCorrupt, err, "state.db %s has invalid identity meta: %v; refusing to start (file left untouched)", path, err)
	}
	return id, nil
}

// verifyStateMeta checks state.db's meta (schema, identity, location record) against
// the marker's IDs.
func verifyStateMeta(tx *bolt.Tx, path, markerPath string, marker Identity) (stateMeta, error) {
	got, err := readStateMeta(tx, path)
	if err != nil {
		return stateMeta{}, err
	}
	if got.id.StorageID != marker.StorageID {
		return stateMeta{}, refuse(ErrForeign, "state.db %s has storage_id %s but marker %s says %s: they belong to different installations; refusing to start (files left untouched)", path, got.id.StorageID, markerPath, marker.StorageID)
	}
	if got.id.InstallationID != marker.InstallationID {
		return stateMeta{}, refuse(ErrForeign, "state.db %s has installation_id %s but marker %s says %s: they belong to different installations; refusing to start (files left untouched)", path, got.id.InstallationID, markerPath, marker.InstallationID)
	}
	return got, nil
}
