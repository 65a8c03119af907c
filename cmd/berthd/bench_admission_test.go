package main

// Accept latency (POST /provision → 202) of a burst of concurrent provisions on
// the fake engine: the daemon's own share of it, with no dockerd beside it
// competing for the CPU. Each round sends a burst to a warm daemon, waits for
// every lease to be ready, and closes them; the next burst comes right behind
// the closes (what a registry still committing them costs an admission shows).
// The p50/p99 over all rounds is reported. BERTH_SCALE_PROFILE=<dir> writes a CPU profile of the last burst.
//
//	go test -run '^$' -bench BenchmarkAdmission -benchtime 5x ./cmd/berthd/

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

func BenchmarkAdmission_100ConcurrentProvisions_FakeEngine(b *testing.B) {
	const burst = 100
	engines := &scaleEngine{}
	testHooks.engine = engines.get
	b.Cleanup(func() { testHooks.engine = nil })
	cb := newScaleReceiver(b)
	d := scaleDaemonDir(b, scaleConfig(burst*2)...)
	b.Cleanup(func() { scaleStop(b, d) })
	scaleStart(b, d)
	client := newBenchClient(d)
	manifest, _ := json.Marshal(map[string]any{"image": testImage()})

	var accept []time.Duration
	b.ResetTimer()
	for round := range b.N {
		leases := make([]string, burst)
		for i := range leases {
			leases[i] = uuid.NewString()
		}
		took := make([]time.Duration, burst)
		errs := make([]error, burst)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for i := range leases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := scaleProvisionBody(leases[i], cb.url, manifest)
				<-gate
				sent := time.Now()
				code, resp, err := client.do(http.MethodPost, "/provision", body)
				took[i] = time.Since(sent)
				if err == nil && code != http.StatusAccepted {
					err = fmt.Errorf("provision: %d %s", code, resp)
				}
				errs[i] = err
			}()
		}
		stop := func() {}
		if round == b.N-1 {
			stop = scaleProfile(b, "admission-burst")
		}
		close(gate)
		wg.Wait()
		stop()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		accept = append(accept, took...)
		b.StopTimer()
		deadline := time.Now().Add(time.Minute)
		for {
			ready, _, _, other, lastErr, _ := cb.state()
			if ready >= (round+1)*burst {
				break
			}
			delete(other, "deprovisioned")
			if len(other) > 0 || time.Now().After(deadline) {
				b.Fatalf("round %d: %d ready, other callbacks %v (%s)", round, ready, other, lastErr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		closeStart := time.Now()
		err := benchForEachLimited(burst, burst, func(i int) error {
			body, _ := json.Marshal(map[string]string{"lease_uuid": leases[i]})
			if code, resp, err := client.do(http.MethodPost, "/deprovision", body); err != nil || code != http.StatusOK {
				return fmt.Errorf("deprovision %s: %d %s %v", leases[i], code, resp, err)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("round %d: closed in %s", round, time.Since(closeStart).Round(time.Millisecond))
		b.StartTimer()
	}
	b.StopTimer()
	p50, p99 := benchPercentile(accept, 0.5), benchPercentile(accept, 0.99)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(benchMs(p50), "accept_p50_ms")
	b.ReportMetric(benchMs(p99), "accept_p99_ms")
	benchPrint(b, fmt.Sprintf("%d concurrent POST /provision on the fake engine, %d rounds: p50 %s p99 %s\n",
		burst, b.N, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond)))
}
