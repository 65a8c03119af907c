package persistence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkAppend64Writers: 64 concurrent writers, one event per Commit each (their
// own lease stream), on a fresh store. Reports events/s and the p99 Commit latency.
func BenchmarkAppend64Writers(b *testing.B) {
	const writers = 64
	s, _, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := json.RawMessage(`{"operation_id":"0b4f7c2e-3f7a-4a59-9d7e-6a1c1f9b2d11","status":"ready","generation":3}`)
	var (
		next      atomic.Int64
		wg        sync.WaitGroup
		latencies = make([][]time.Duration, writers)
		failed    atomic.Value
	)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			stream := fmt.Sprintf("lease/%02d", w)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				_, err := s.Commit(Write{Appends: []Append{{Stream: stream, Events: []Event{{Type: "Ready", V: 1, Data: data}}}}})
				latencies[w] = append(latencies[w], time.Since(t0))
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	p99 := all[(len(all)*99)/100]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99_ms")
	b.ReportMetric(float64(all[len(all)/2])/float64(time.Millisecond), "p50_ms")
}

// BenchmarkAppendLoneWriter: one writer committing one event at a time — the latency
// a lease actor sees on an idle daemon (bounded below by the batch delay + fsync).
func BenchmarkAppendLoneWriter(b *testing.B) {
	s, _, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := json.RawMessage(`{"status":"ready"}`)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Commit(Write{Appends: []Append{{Stream: "lease/x", Events: []Event{{Type: "Ready", V: 1, Data: data}}}}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/float64(time.Millisecond), "p50_ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100])/float64(time.Millisecond), "p99_ms")
}

// BenchmarkDiagnosticsPrune_LargeFileNothingExpired is the hourly prune on a large
// diagnostics.db (2000 leases × 100 captures of 1 KiB, ~200 MiB) with nothing old
// enough: one seek per lease, no walk of the young rows.
func BenchmarkDiagnosticsPrune_LargeFileNothingExpired(b *testing.B) {
	d, err := OpenDiagnostics(Options{Dir: b.TempDir(), MaxFileBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	blob := []byte(`"` + strings.Repeat("x", 1024) + `"`)
	for l := 0; l < 2000; l += 100 {
		err := d.db.Update(func(tx *bolt.Tx) error {
			root := tx.Bucket(bucketDiagLeases)
			for j := l; j < l+100; j++ {
				lb, err := root.CreateBucket([]byte(fmt.Sprintf("lease-%05d", j)))
				if err != nil {
					return err
				}
				for i := 0; i < 100; i++ {
					if err := lb.Put(diagKey(t0.Add(time.Duration(i)*time.Minute), uint64(i)), blob); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := d.Prune(t0); err != nil || n != 0 {
			b.Fatalf("Prune = %d, %v", n, err)
		}
	}
}
