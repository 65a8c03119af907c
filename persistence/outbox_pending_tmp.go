package persistence

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// OutboxPending counts a lease's pending rows of the given kind. (Temporary:
// replaced by the persistence branch's version at merge.)
func (s *Store) OutboxPending(lease, kind string) (int, error) {
	if err := validName("outbox lease", lease); err != nil {
		return 0, err
	}
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		n = 0
		lb := nested(tx, bucketOutbox, lease)
		if lb == nil {
			return nil
		}
		return lb.ForEach(func(k, v []byte) error {
			e, err := s.decodeOutbox(lease, k, v)
			if err != nil {
				return err
			}
			if e.Row.Kind == kind {
				n++
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("count outbox rows of %s: %w", lease, err)
	}
	return n, nil
}

// Findings lists what the store noticed at open that does not refuse it.
// (Temporary: replaced by the persistence branch's version at merge.)
func (s *Store) Findings() []string { return nil }
