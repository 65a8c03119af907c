package persistence

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
