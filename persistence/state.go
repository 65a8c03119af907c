package persistence

import (
	"fmt"
)

// LoadState rebuilds the state of a stream with a single writer: the latest
// snapshot (written at version v) decoded into into, then decoded (if not nil)
// to repair what JSON leaves unset, then every later event applied in order.
// It returns the stream's last sequence number. An unknown snapshot version or
// an event that does not apply refuses the whole load, naming the stream.
func (s *Store) LoadState(stream string, v int, into any, decoded func(), apply func(Event) error) (uint64, error) {
	l, err := s.Load(stream)
	if err != nil {
		return 0, fmt.Errorf("load %s: %w", stream, err)
	}
	if l.Snapshot != nil {
		if l.Snapshot.V != v {
			return 0, fmt.Errorf("load %s: snapshot version %d not supported", stream, l.Snapshot.V)
		}
		if err := DecodeValid(l.Snapshot.Data, into); err != nil {
			return 0, fmt.Errorf("load %s: snapshot: %w", stream, err)
		}
	}
	if decoded != nil {
		decoded()
	}
	for _, r := range l.Events {
		if err := apply(r.Event); err != nil {
			return 0, fmt.Errorf("load %s: seq %d: %w", stream, r.Seq, err)
		}
	}
	return l.LastSeq, nil
}
