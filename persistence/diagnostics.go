package persistence

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// diagnostics.db layout: meta{schema_version} and leases/<lease>, whose keys are
// 8-byte big-endian unix-nanos then an 8-byte per-bucket counter (so two captures at
// the same instant both survive), in time order.
var bucketDiagLeases = []byte("leases")

// Diagnostics is the separate, recreatable diagnostics.db (failure captures, bounded
// logs). It carries no lifecycle authority and is not identity-bound, but gets the
// same open-time file checks as state.db. Safe for concurrent use.
type Diagnostics struct {
	db   *bolt.DB
	path string
}

// OpenDiagnostics opens <dir>/diagnostics.db, creating it when absent. An existing
// file that is a symlink, not 0600, over the ceiling, corrupt or of a newer schema is
// refused and left untouched (delete it while stopped to start afresh).
func OpenDiagnostics(opts Options) (*Diagnostics, error) {
	opts = opts.withDefaults()
	if err := ensureDir(opts.Dir); err != nil {
		return nil, err
	}
	path := filepath.Join(opts.Dir, diagnosticsFileName)
	exists, err := lexists(path)
	if err != nil {
		return nil, err
	}
	if !exists {
		err := createBoltFile(path, func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(metaSchemaVersion, []byte(strconv.Itoa(SchemaVersion))); err != nil {
				return err
			}
			_, err = tx.CreateBucket(bucketDiagLeases)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("create diagnostics.db %s: %w", path, err)
		}
	}
	fid, err := inspectBolt(path, "diagnostics.db", opts.MaxFileBytes, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return refuse(ErrCorrupt, "diagnostics.db %s has no meta bucket; refusing it (file left untouched)", path)
		}
		return readSchema(meta, "diagnostics.db", path)
	})
	if err != nil {
		return nil, err
	}
	db, err := openBoltRW(path, "diagnostics.db", fid, opts.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	return &Diagnostics{db: db, path: path}, nil
}

// Path is diagnostics.db's path.
func (d *Diagnostics) Path() string { return d.path }

func diagKey(at time.Time, n uint64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(max(at.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[8:], n)
	return k[:]
}

// Put stores blob (valid JSON) for lease at time at.
func (d *Diagnostics) Put(lease string, at time.Time, blob json.RawMessage) error {
	if err := validName("lease", lease); err != nil {
		return err
	}
	if !json.Valid(blob) {
		return badInput("diagnostics blob for lease %q is not valid JSON", lease)
	}
	err := d.db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketDiagLeases)
		if err != nil {
			return err
		}
		lb, err := root.CreateBucketIfNotExists([]byte(lease))
		if err != nil {
			return err
		}
		n, err := lb.NextSequence()
		if err != nil {
			return err
		}
		return lb.Put(diagKey(at, n), blob)
	})
	if err != nil {
		return fmt.Errorf("put diagnostics for %q in %s: %w", lease, d.path, err)
	}
	return nil
}

// Latest returns the most recent blob stored for lease.
func (d *Diagnostics) Latest(lease string) (json.RawMessage, bool, error) {
	if err := validName("lease", lease); err != nil {
		return nil, false, err
	}
	var out json.RawMessage
	err := d.db.View(func(tx *bolt.Tx) error {
		out = nil
		root := tx.Bucket(bucketDiagLeases)
		if root == nil {
			return nil
		}
		lb := root.Bucket([]byte(lease))
		if lb == nil {
			return nil
		}
		if k, v := lb.Cursor().Last(); k != nil {
			out = append(json.RawMessage(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read diagnostics for %q in %s: %w", lease, d.path, err)
	}
	return out, out != nil, nil
}

// Prune deletes every blob stored before olderThan, drops leases left empty, and
// returns how many blobs it deleted.
func (d *Diagnostics) Prune(olderThan time.Time) (int, error) {
	cutoff := uint64(max(olderThan.UnixNano(), 0))
	deleted := 0
	err := d.db.Update(func(tx *bolt.Tx) error {
		deleted = 0
		root := tx.Bucket(bucketDiagLeases)
		if root == nil {
			return nil
		}
		var empty [][]byte
		err := root.ForEachBucket(func(name []byte) error {
			lb := root.Bucket(name)
			c := lb.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.First() {
				if len(k) != 16 || binary.BigEndian.Uint64(k[:8]) >= cutoff {
					break
				}
				if err := c.Delete(); err != nil {
					return err
				}
				deleted++
			}
			if k, _ := c.First(); k == nil {
				empty = append(empty, append([]byte(nil), name...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, name := range empty {
			if err := root.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune diagnostics in %s: %w", d.path, err)
	}
	return deleted, nil
}

// Close closes diagnostics.db.
func (d *Diagnostics) Close() error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", d.path, err)
	}
	return nil
}
