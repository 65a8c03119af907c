package registry

import (
	"reflect"
	"testing"

	"github.com/berth-dev/berth/messages"
)

func seqs(rep messages.TransitionsReply) []uint64 {
	out := []uint64{}
	for _, tr := range rep.Transitions {
		out = append(out, tr.Seq)
	}
	return out
}

func TestTransitions_RingKeepsTheNewestAndCountsWhatItDropped(t *testing.T) {
	r := NewTransitions(4)
	if rep := r.Since(0, 0); len(rep.Transitions) != 0 || rep.Next != 0 || rep.Missed != 0 || rep.Transitions == nil {
		t.Fatalf("empty ring: %+v", rep)
	}
	for i := 0; i < 6; i++ {
		tr := r.Add(t0, "l", "a", "b", "")
		if tr.Seq != uint64(i+1) || !tr.At.Equal(t0) || tr.LeaseUUID != "l" || tr.From != "a" || tr.To != "b" {
			t.Fatalf("add %d = %+v", i, tr)
		}
	}
	for _, c := range []struct {
		since  uint64
		limit  int
		want   []uint64
		next   uint64
		missed uint64
	}{
		{0, 0, []uint64{3, 4, 5, 6}, 6, 2}, // seqs 1 and 2 were evicted
		{1, 0, []uint64{3, 4, 5, 6}, 6, 1},
		{2, 0, []uint64{3, 4, 5, 6}, 6, 0},
		{4, 0, []uint64{5, 6}, 6, 0},
		{0, 2, []uint64{3, 4}, 4, 2},
		{3, 1, []uint64{4}, 4, 0},
		{6, 0, []uint64{}, 6, 0},
		{9, 0, []uint64{3, 4, 5, 6}, 6, 2}, // a seq of another process: from the start
	} {
		rep := r.Since(c.since, c.limit)
		if got := seqs(rep); !reflect.DeepEqual(got, c.want) || rep.Next != c.next || rep.Missed != c.missed {
			t.Errorf("Since(%d, %d) = %v next %d missed %d, want %v next %d missed %d",
				c.since, c.limit, got, rep.Next, rep.Missed, c.want, c.next, c.missed)
		}
	}
	if r.Last() != 6 {
		t.Fatalf("Last = %d", r.Last())
	}
}
