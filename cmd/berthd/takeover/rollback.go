package takeover

import (
	"fmt"
	"slices"

	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/persistence"
)

// Journals is what RollbackSafe reads of a store.
type Journals interface {
	Load(stream string) (persistence.Loaded, error)
	Streams(prefix string) ([]string, error)
	OutboxAll() ([]persistence.OutboxEntry, error)
}

// Rollback says whether giving the host back to fred v0.13 is still safe: only
// while berthd has changed nothing fred would see — no admission, close,
// maintenance or failure journaled since the adoption (so no container, volume
// or lease changed). Callbacks berthd delivered are resent by fred, which still
// holds them: that is said, not a reason to refuse.
type Rollback struct {
	Safe bool     `json:"rollback_safe"`
	Why  []string `json:"why,omitempty"`
	Note string   `json:"note,omitempty"`
}

// RollbackSafe judges a data dir an adoption made.
func RollbackSafe(j Journals, rec *Record) (Rollback, error) {
	var r Rollback
	reg, err := j.Load(registry.Stream)
	if err != nil {
		return r, err
	}
	if reg.LastSeq != uint64(len(rec.Leases)) {
		r.Why = append(r.Why, fmt.Sprintf("the registry journaled %d events since the adoption (admissions, closes, retention)", reg.LastSeq-uint64(len(rec.Leases))))
	}
	streams, err := j.Streams("lease/")
	if err != nil {
		return r, err
	}
	for _, s := range streams {
		got, err := j.Load(s)
		if err != nil {
			return r, err
		}
		id := s[len("lease/"):]
		switch {
		case !slices.Contains(rec.Leases, id):
			r.Why = append(r.Why, "lease "+id+" was admitted by berthd")
		case got.LastSeq > 1:
			r.Why = append(r.Why, fmt.Sprintf("lease %s changed since its adoption (%d events)", id, got.LastSeq-1))
		}
	}
	rows, err := j.OutboxAll()
	if err != nil {
		return r, err
	}
	if delivered := rec.Callbacks - len(rows); delivered > 0 {
		r.Note = fmt.Sprintf("berthd delivered %d of the callbacks fred owed; fred still holds them and would send them again", delivered)
	}
	r.Safe = len(r.Why) == 0
	return r, nil
}
