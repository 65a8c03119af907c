package persistence

import (
	"encoding/json"
	"fmt"
	"time"
)

// Cursor is where a stream's single writer (an actor) stands: the stream's last
// sequence number, and how many events it journaled since its last snapshot.
type Cursor struct {
	Stream string
	Seq    uint64
	Every  int // snapshot once this many events were journaled since the last one
	since  int
}

// Advance records a commit that appended n events to the stream and reports
// whether a snapshot is due.
func (c *Cursor) Advance(res Committed, n int) bool {
	c.Seq = res.LastSeq[c.Stream]
	c.since += n
	return c.since >= c.Every
}

// Snapshot saves state as the stream's snapshot at Seq, compacting the journal
// up to it.
func (c *Cursor) Snapshot(s *Store, v int, at time.Time, state any) error {
	data, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", c.Stream, err)
	}
	if err := s.SaveSnapshot(c.Stream, Snapshot{Seq: c.Seq, V: v, At: at, Data: data}); err != nil {
		return err
	}
	c.since = 0
	return nil
}
