package persistence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// appendFillPercent packs journal pages tightly: keys only ever grow at the end.
const appendFillPercent = 0.9

// Event is one journal entry's envelope, stored as JSON {"type","v","at","data"}.
type Event struct {
	Type string          `json:"type"`
	V    int             `json:"v"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Record is an Event with its per-stream sequence number (1, 2, 3…).
type Record struct {
	Seq uint64
	Event
}

// Append adds Events, in order, to one stream ("registry", "lease/<uuid>", …).
type Append struct {
	Stream string
	Events []Event
}

// Write is one atomic write: appends to any number of streams, new outbox rows and
// outbox deletions, all in one bbolt transaction, so a state change and the callback
// it produces land together or not at all.
type Write struct {
	Appends      []Append
	Outbox       []OutboxRow
	DeleteOutbox []OutboxKey
}

// Committed reports what a Commit assigned.
type Committed struct {
	LastSeq    map[string]uint64 // stream → seq of its last appended event
	OutboxKeys []OutboxKey       // keys assigned to Write.Outbox, same order
}

// Snapshot is a stream's state as of journal sequence Seq.
type Snapshot struct {
	Seq  uint64          `json:"seq"`
	V    int             `json:"v"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data"`
}

// Loaded is what a stream's owner rebuilds from: the latest snapshot (if any) and
// the events after it, ascending.
type Loaded struct {
	Snapshot *Snapshot
	Events   []Record // seq > snapshot seq, ascending
	LastSeq  uint64   // last sequence ever assigned in the stream (0 = none)
}

// encodedAppend and encodedRow are a Write validated and marshalled before the
// transaction, so the transaction only copies bytes (and can be re-run by Batch).
type encodedAppend struct {
	stream []byte
	values [][]byte
}

type encodedRow struct {
	lease []byte
	value []byte
}

type writePlan struct {
	appends []encodedAppend
	rows    []encodedRow
	deletes []OutboxKey
}

// encodeWrite validates w and marshals every value; any problem is an input error
// and nothing is written.
func encodeWrite(w Write, now time.Time) (writePlan, error) {
	plan := writePlan{deletes: w.DeleteOutbox}
	for _, a := range w.Appends {
		if err := validName("stream", a.Stream); err != nil {
			return writePlan{}, err
		}
		if len(a.Events) == 0 {
			return writePlan{}, badInput("append to stream %q has no events", a.Stream)
		}
		ea := encodedAppend{stream: []byte(a.Stream), values: make([][]byte, 0, len(a.Events))}
		for i, ev := range a.Events {
			if ev.Type == "" {
				return writePlan{}, badInput("stream %q event %d has no type", a.Stream, i)
			}
			if ev.At.IsZero() {
				ev.At = now
			}
			raw, err := json.Marshal(ev)
			if err != nil {
				return writePlan{}, badInput("stream %q event %d (%s) does not encode: %v", a.Stream, i, ev.Type, err)
			}
			ea.values = append(ea.values, raw)
		}
		plan.appends = append(plan.appends, ea)
	}
	for i, row := range w.Outbox {
		if err := validName("outbox lease", row.Lease); err != nil {
			return writePlan{}, err
		}
		if row.DeliveryID == "" {
			return writePlan{}, badInput("outbox row %d for lease %q has no delivery_id", i, row.Lease)
		}
		if row.CreatedAt.IsZero() {
			row.CreatedAt = now
		}
		raw, err := json.Marshal(row)
		if err != nil {
			return writePlan{}, badInput("outbox row %d for lease %q does not encode: %v", i, row.Lease, err)
		}
		plan.rows = append(plan.rows, encodedRow{lease: []byte(row.Lease), value: raw})
	}
	for _, k := range w.DeleteOutbox {
		if err := validName("outbox lease", k.Lease); err != nil {
			return writePlan{}, err
		}
	}
	return plan, nil
}

// apply performs the plan inside tx. Sequences are taken from the buckets inside the
// transaction, so a re-run after a batch rollback assigns the same numbers afresh.
func (p writePlan) apply(tx *bolt.Tx, out *Committed) error {
	if len(p.deletes) > 0 {
		if ob := tx.Bucket(bucketOutbox); ob != nil {
			for _, k := range p.deletes {
				if err := deleteOutboxRow(ob, k); err != nil {
					return err
				}
			}
		}
	}
	if len(p.appends) > 0 {
		jr, err := tx.CreateBucketIfNotExists(bucketJournal)
		if err != nil {
			return fmt.Errorf("journal bucket: %w", err)
		}
		for _, a := range p.appends {
			b, err := jr.CreateBucketIfNotExists(a.stream)
			if err != nil {
				return fmt.Errorf("journal/%s bucket: %w", a.stream, err)
			}
			b.FillPercent = appendFillPercent
			var seq uint64
			for _, v := range a.values {
				if seq, err = b.NextSequence(); err != nil {
					return fmt.Errorf("journal/%s sequence: %w", a.stream, err)
				}
				if err := b.Put(u64key(seq), v); err != nil {
					return fmt.Errorf("journal/%s put %d: %w", a.stream, seq, err)
				}
			}
			out.LastSeq[string(a.stream)] = seq
		}
	}
	if len(p.rows) > 0 {
		ob, err := tx.CreateBucketIfNotExists(bucketOutbox)
		if err != nil {
			return fmt.Errorf("outbox bucket: %w", err)
		}
		for _, r := range p.rows {
			seq, err := ob.NextSequence()
			if err != nil {
				return fmt.Errorf("outbox sequence: %w", err)
			}
			lb, err := ob.CreateBucketIfNotExists(r.lease)
			if err != nil {
				return fmt.Errorf("outbox/%s bucket: %w", r.lease, err)
			}
			lb.FillPercent = appendFillPercent
			if err := lb.Put(u64key(seq), r.value); err != nil {
				return fmt.Errorf("outbox/%s put %d: %w", r.lease, seq, err)
			}
			out.OutboxKeys = append(out.OutboxKeys, OutboxKey{Lease: string(r.lease), Seq: seq})
		}
	}
	return nil
}

// Commit performs w atomically through db.Batch, so concurrent callers share fsyncs.
// Bad input is refused before anything is written (IsInputError; no latch). Any other
// failure latches the store and returns an error wrapping ErrLatched.
func (s *Store) Commit(w Write) (Committed, error) {
	if err := s.writable(); err != nil {
		return Committed{}, err
	}
	plan, err := encodeWrite(w, s.opts.Now())
	if err != nil {
		return Committed{}, err
	}
	if len(plan.appends) == 0 && len(plan.rows) == 0 && len(plan.deletes) == 0 {
		return Committed{LastSeq: map[string]uint64{}}, nil
	}
	var out Committed
	err = s.update("commit", func(tx *bolt.Tx) error {
		out = Committed{LastSeq: make(map[string]uint64, len(plan.appends))}
		return plan.apply(tx, &out)
	})
	if err != nil {
		return Committed{}, err
	}
	return out, nil
}

// Load returns a stream's latest snapshot and every event after it. Anything that
// does not decode, or a gap in the sequence, is ErrCorrupt naming the stream and seq.
func (s *Store) Load(stream string) (Loaded, error) {
	if err := validName("stream", stream); err != nil {
		return Loaded{}, err
	}
	var out Loaded
	err := s.db.View(func(tx *bolt.Tx) error {
		var after uint64
		if sb := nested(tx, bucketSnapshot, stream); sb != nil {
			if raw := sb.Get(snapshotKey); raw != nil {
				var snap Snapshot
				if err := Decode(raw, &snap); err != nil {
					return refuseCause(ErrCorrupt, err, "state.db %s: stream %q snapshot does not decode: %v", s.path, stream, err)
				}
				out.Snapshot = &snap
				after = snap.Seq
			}
		}
		out.LastSeq = after
		jb := nested(tx, bucketJournal, stream)
		if jb == nil {
			return nil
		}
		out.LastSeq = max(out.LastSeq, jb.Sequence())
		want := after + 1
		c := jb.Cursor()
		for k, v := c.Seek(u64key(want)); k != nil; k, v = c.Next() {
			seq, ok := keyU64(k)
			if !ok {
				return refuse(ErrCorrupt, "state.db %s: stream %q has a malformed key %x", s.path, stream, k)
			}
			if seq != want {
				return refuse(ErrCorrupt, "state.db %s: stream %q jumps from seq %d to %d", s.path, stream, want-1, seq)
			}
			var ev Event
			if err := Decode(v, &ev); err != nil {
				return refuseCause(ErrCorrupt, err, "state.db %s: stream %q seq %d does not decode: %v", s.path, stream, seq, err)
			}
			if ev.Type == "" {
				return refuse(ErrCorrupt, "state.db %s: stream %q seq %d has no type", s.path, stream, seq)
			}
			out.Events = append(out.Events, Record{Seq: seq, Event: ev})
			want++
		}
		if want-1 != out.LastSeq {
			return refuse(ErrCorrupt, "state.db %s: stream %q ends at seq %d but its sequence is %d", s.path, stream, want-1, out.LastSeq)
		}
		return nil
	})
	if err != nil {
		return Loaded{}, err
	}
	return out, nil
}

// SaveSnapshot stores snap as the stream's latest snapshot and deletes the journal
// entries it covers (seq ≤ snap.Seq), in one transaction. A snapshot beyond the
// stream's last seq, or older than the stored one, is refused as bad input.
func (s *Store) SaveSnapshot(stream string, snap Snapshot) error {
	if err := s.writableFor("stream", stream); err != nil {
		return err
	}
	if snap.At.IsZero() {
		snap.At = s.opts.Now()
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		return badInput("stream %q snapshot does not encode: %v", stream, err)
	}
	name := []byte(stream)
	return s.update("save snapshot", func(tx *bolt.Tx) error {
		jb := nested(tx, bucketJournal, stream)
		var last uint64
		if jb != nil {
			last = jb.Sequence()
		}
		if snap.Seq > last {
			return badInput("stream %q snapshot at seq %d is beyond its last seq %d", stream, snap.Seq, last)
		}
		sr, err := tx.CreateBucketIfNotExists(bucketSnapshot)
		if err != nil {
			return fmt.Errorf("snapshot bucket: %w", err)
		}
		sb, err := sr.CreateBucketIfNotExists(name)
		if err != nil {
			return fmt.Errorf("snapshot/%s bucket: %w", stream, err)
		}
		if old := sb.Get(snapshotKey); old != nil {
			var prev Snapshot
			if json.Unmarshal(old, &prev) == nil && snap.Seq < prev.Seq {
				return badInput("stream %q snapshot at seq %d is older than the stored one at %d", stream, snap.Seq, prev.Seq)
			}
		}
		if err := sb.Put(snapshotKey, raw); err != nil {
			return fmt.Errorf("snapshot/%s put: %w", stream, err)
		}
		if jb == nil {
			return nil
		}
		// Re-seek after each delete: bbolt cursors may skip an entry when Next
		// follows Delete.
		c := jb.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.First() {
			seq, ok := keyU64(k)
			if !ok || seq > snap.Seq {
				break
			}
			if err := c.Delete(); err != nil {
				return fmt.Errorf("journal/%s compact %d: %w", stream, seq, err)
			}
		}
		return nil
	})
}

// Streams returns the sorted names, starting with prefix, of streams that have a
// journal or a snapshot.
func (s *Store) Streams(prefix string) ([]string, error) {
	seen := map[string]struct{}{}
	err := s.db.View(func(tx *bolt.Tx) error {
		p := []byte(prefix)
		for _, root := range [][]byte{bucketJournal, bucketSnapshot} {
			r := tx.Bucket(root)
			if r == nil {
				continue
			}
			c := r.Cursor()
			for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
				if v == nil {
					seen[string(k)] = struct{}{}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list streams in %s: %w", s.path, err)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// RetireStream deletes a stream's journal and snapshot when it still ends at
// seq, and records its name as retired, in one transaction: a stream written
// meanwhile (a lease admitted again) is kept, and it reports false. The
// record (a name and a time, ~50 bytes) is what keeps a retired lease UUID
// used (Retired) once its history is gone.
func (s *Store) RetireStream(stream string, seq uint64) (bool, error) {
	if err := s.writableFor("stream", stream); err != nil {
		return false, err
	}
	retired := false
	err := s.update("retire stream", func(tx *bolt.Tx) error {
		last := uint64(0)
		if sb := nested(tx, bucketSnapshot, stream); sb != nil {
			var snap Snapshot
			if raw := sb.Get(snapshotKey); raw != nil && Decode(raw, &snap) == nil {
				last = snap.Seq
			}
		}
		if jb := nested(tx, bucketJournal, stream); jb != nil {
			last = max(last, jb.Sequence())
		}
		if last != seq {
			return nil
		}
		for _, root := range [][]byte{bucketJournal, bucketSnapshot} {
			if r := tx.Bucket(root); r != nil {
				if err := deleteBucket(r, []byte(stream)); err != nil {
					return fmt.Errorf("delete %s/%s: %w", root, stream, err)
				}
			}
		}
		b, err := tx.CreateBucketIfNotExists(bucketRetired)
		if err != nil {
			return err
		}
		retired = true
		return b.Put([]byte(stream), u64key(uint64(s.opts.Now().Unix())))
	})
	return retired, err
}

// Retired reports whether stream was retired (RetireStream).
func (s *Store) Retired(stream string) (bool, error) {
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketRetired); b != nil {
			found = b.Get([]byte(stream)) != nil
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read retired streams in %s: %w", s.path, err)
	}
	return found, nil
}

// DeleteStream removes a stream's journal and snapshot; a missing stream is a no-op.
// Its sequence starts again at 1 if it is ever written again.
func (s *Store) DeleteStream(stream string) error {
	if err := s.writableFor("stream", stream); err != nil {
		return err
	}
	name := []byte(stream)
	return s.update("delete stream", func(tx *bolt.Tx) error {
		for _, root := range [][]byte{bucketJournal, bucketSnapshot} {
			r := tx.Bucket(root)
			if r == nil {
				continue
			}
			if err := deleteBucket(r, name); err != nil {
				return fmt.Errorf("delete %s/%s: %w", root, stream, err)
			}
		}
		return nil
	})
}
