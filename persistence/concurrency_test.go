package persistence

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
)

// TestCommit_64ConcurrentWriters_PerStreamSeqsContiguous runs 64 goroutines
// committing two-event appends onto 8 shared streams, mixed with snapshot requests
// that are refused inside the transaction (so bbolt rolls batches back and re-runs
// their other members). Every stream must end with contiguous seqs, each commit's two
// events adjacent, each writer's commits in its own order, and every LastSeq unique.
func TestCommit_64ConcurrentWriters_PerStreamSeqsContiguous(t *testing.T) {
	s := newStore(t)
	const writers, commits, streams = 64, 20, 8
	type pair struct {
		W, K, I int
	}
	var (
		mu       sync.Mutex
		lastSeqs = map[string][]uint64{}
		wg       sync.WaitGroup
		errs     = make(chan error, writers)
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			stream := fmt.Sprintf("lease/%d", w%streams)
			for k := 0; k < commits; k++ {
				c, err := s.Commit(Write{Appends: []Append{{Stream: stream, Events: []Event{
					ev("Half", pair{w, k, 0}), ev("Half", pair{w, k, 1}),
				}}}})
				if err != nil {
					errs <- fmt.Errorf("writer %d commit %d: %w", w, k, err)
					return
				}
				mu.Lock()
				lastSeqs[stream] = append(lastSeqs[stream], c.LastSeq[stream])
				mu.Unlock()
				if k%5 == 0 {
					// Always beyond the journal: refused inside the tx, never latches.
					if err := s.SaveSnapshot(stream, Snapshot{Seq: 1 << 40, Data: json.RawMessage(`{}`)}); !IsInputError(err) {
						errs <- fmt.Errorf("writer %d: bad snapshot returned %v", w, err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Fatalf("store latched: %v", s.Err())
	}
	perStream := writers / streams * commits * 2
	for i := 0; i < streams; i++ {
		stream := fmt.Sprintf("lease/%d", i)
		l, err := s.Load(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Events) != perStream || l.LastSeq != uint64(perStream) {
			t.Fatalf("%s: %d events, LastSeq %d; want %d", stream, len(l.Events), l.LastSeq, perStream)
		}
		nextK := map[int]int{}
		for j := 0; j < len(l.Events); j += 2 {
			a, b := l.Events[j], l.Events[j+1]
			if a.Seq != uint64(j+1) || b.Seq != uint64(j+2) {
				t.Fatalf("%s: seqs %d,%d at %d", stream, a.Seq, b.Seq, j)
			}
			var pa, pb pair
			if json.Unmarshal(a.Data, &pa) != nil || json.Unmarshal(b.Data, &pb) != nil {
				t.Fatalf("%s: undecodable event at %d", stream, j)
			}
			if pa.I != 0 || pb.I != 1 || pa.W != pb.W || pa.K != pb.K {
				t.Fatalf("%s seq %d: halves %+v %+v are not one commit", stream, a.Seq, pa, pb)
			}
			if pa.K != nextK[pa.W] {
				t.Fatalf("%s: writer %d commit %d out of order (want %d)", stream, pa.W, pa.K, nextK[pa.W])
			}
			nextK[pa.W]++
		}
		got := lastSeqs[stream]
		sort.Slice(got, func(a, b int) bool { return got[a] < got[b] })
		for j, seq := range got {
			if seq != uint64(2*(j+1)) {
				t.Fatalf("%s: reported LastSeqs %v are not 2,4,6,…", stream, got)
			}
		}
	}
}
