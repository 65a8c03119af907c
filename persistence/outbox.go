package persistence

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// OutboxRow is a durable callback waiting for delivery.
type OutboxRow struct {
	Lease      string          `json:"lease"`
	DeliveryID string          `json:"delivery_id"` // UUID, stable across retries/restarts
	URL        string          `json:"url"`
	Body       json.RawMessage `json:"body"`
	Kind       string          `json:"kind"` // KindOperation | KindLifecycle | KindMaintenance
	CreatedAt  time.Time       `json:"created_at"`
}

// Outbox row kinds. Operation (provision/restore) and maintenance completions are
// exact: only their delivery removes them. Lifecycle observations (deaths,
// deprovisions) may also leave undelivered: coalesced or aged out by the outbox.
const (
	KindOperation   = "operation"
	KindLifecycle   = "lifecycle"
	KindMaintenance = "maintenance"
)

// OutboxKey names one row: outbox/<Lease>/<Seq>. Seq comes from one global counter,
// so it orders rows per lease (FIFO) and across leases (creation order).
type OutboxKey struct {
	Lease string
	Seq   uint64
}

// OutboxEntry is a row with its key.
type OutboxEntry struct {
	Key OutboxKey
	Row OutboxRow
}

// deleteOutboxRow deletes one row and drops the lease's bucket once it is empty, so
// "has a bucket" means "has pending rows". A missing row is a no-op.
func deleteOutboxRow(ob *bolt.Bucket, k OutboxKey) error {
	lb := ob.Bucket([]byte(k.Lease))
	if lb == nil {
		return nil
	}
	if err := lb.Delete(u64key(k.Seq)); err != nil {
		return fmt.Errorf("outbox/%s delete %d: %w", k.Lease, k.Seq, err)
	}
	if first, _ := lb.Cursor().First(); first == nil {
		if err := deleteBucket(ob, []byte(k.Lease)); err != nil {
			return fmt.Errorf("outbox/%s drop empty bucket: %w", k.Lease, err)
		}
	}
	return nil
}

// decodeOutbox decodes one row, naming it on failure.
func (s *Store) decodeOutbox(lease string, k, v []byte) (OutboxEntry, error) {
	seq, ok := keyU64(k)
	if !ok {
		return OutboxEntry{}, refuse(ErrCorrupt, "state.db %s: outbox/%s has a malformed key %x", s.path, lease, k)
	}
	var row OutboxRow
	if err := json.Unmarshal(v, &row); err != nil {
		return OutboxEntry{}, refuseCause(ErrCorrupt, err, "state.db %s: outbox/%s row %d does not decode: %v", s.path, lease, seq, err)
	}
	return OutboxEntry{Key: OutboxKey{Lease: lease, Seq: seq}, Row: row}, nil
}

// appendOutboxRows appends the rows of lease's bucket lb to rows, oldest first.
func (s *Store) appendOutboxRows(rows []OutboxEntry, lease string, lb *bolt.Bucket) ([]OutboxEntry, error) {
	c := lb.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		e, err := s.decodeOutbox(lease, k, v)
		if err != nil {
			return rows, err
		}
		rows = append(rows, e)
	}
	return rows, nil
}

// forEachOutboxLease calls fn for every lease bucket with at least one row.
func forEachOutboxLease(tx *bolt.Tx, fn func(lease string, lb *bolt.Bucket) error) error {
	ob := tx.Bucket(bucketOutbox)
	if ob == nil {
		return nil
	}
	c := ob.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			continue
		}
		lb := ob.Bucket(k)
		if lb == nil {
			continue
		}
		if first, _ := lb.Cursor().First(); first == nil {
			continue
		}
		if err := fn(string(k), lb); err != nil {
			return err
		}
	}
	return nil
}

// OutboxLeases returns the leases that have at least one pending row, sorted.
func (s *Store) OutboxLeases() ([]string, error) {
	var leases []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachOutboxLease(tx, func(lease string, _ *bolt.Bucket) error {
			leases = append(leases, lease)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox leases in %s: %w", s.path, err)
	}
	return leases, nil
}

// OutboxOf returns one lease's pending rows, oldest first.
func (s *Store) OutboxOf(lease string) ([]OutboxEntry, error) {
	if err := validName("outbox lease", lease); err != nil {
		return nil, err
	}
	rows, err := s.outboxOf(lease)
	if err != nil {
		return nil, fmt.Errorf("read outbox of %s: %w", lease, err)
	}
	return rows, nil
}

// outboxOf reads one lease's pending rows, oldest first.
func (s *Store) outboxOf(lease string) (rows []OutboxEntry, err error) {
	err = s.db.View(func(tx *bolt.Tx) (err error) {
		if lb := nested(tx, bucketOutbox, lease); lb != nil {
			rows, err = s.appendOutboxRows(nil, lease, lb)
		}
		return err
	})
	return rows, err
}

// OutboxAll returns every pending row in global creation order (which is also FIFO
// within each lease).
func (s *Store) OutboxAll() ([]OutboxEntry, error) {
	var all []OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachOutboxLease(tx, func(lease string, lb *bolt.Bucket) (err error) {
			all, err = s.appendOutboxRows(all, lease, lb)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Key.Seq < all[j].Key.Seq })
	return all, nil
}

// OutboxStats returns the number of pending rows and the creation time of the
// oldest (zero when none is pending).
func (s *Store) OutboxStats() (pending int, oldest time.Time, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		return forEachOutboxLease(tx, func(lease string, lb *bolt.Bucket) error {
			c := lb.Cursor()
			k, v := c.First()
			head, err := s.decodeOutbox(lease, k, v)
			if err != nil {
				return err
			}
			if oldest.IsZero() || head.Row.CreatedAt.Before(oldest) {
				oldest = head.Row.CreatedAt
			}
			for ; k != nil; k, _ = c.Next() {
				pending++
			}
			return nil
		})
	})
	if err != nil {
		return 0, time.Time{}, err
	}
	return pending, oldest, nil
}

// OutboxPending counts a lease's pending rows of the given Kind (the maintenance
// fence: no new restart while an earlier maintenance completion is still queued).
// One scan of that lease's bucket; a row that does not decode is ErrCorrupt.
func (s *Store) OutboxPending(lease, kind string) (int, error) {
	if err := validName("outbox lease", lease); err != nil {
		return 0, err
	}
	rows, err := s.outboxOf(lease)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range rows {
		if e.Row.Kind == kind {
			n++
		}
	}
	return n, nil
}

// DeleteOutbox deletes exactly one row (after its delivery); a missing row is a no-op.
func (s *Store) DeleteOutbox(key OutboxKey) error {
	if err := s.writableFor("outbox lease", key.Lease); err != nil {
		return err
	}
	return s.update("delete outbox row", func(tx *bolt.Tx) error {
		ob := tx.Bucket(bucketOutbox)
		if ob == nil {
			return nil
		}
		return deleteOutboxRow(ob, key)
	})
}
