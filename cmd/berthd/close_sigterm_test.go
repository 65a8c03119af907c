package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Most shell, node and python images ignore SIGTERM as PID 1: their close takes
// container_stop_timeout (30 s) before Docker kills them, longer than a close
// request waits (25 s). fred v0.13's client counts any non-200 from /deprovision
// against its circuit breaker (five in a row open it for the whole host), so such
// a close is answered 200 once its intent is durable and teardown is under way —
// the deprovisioned callback tells when it finished. Five in a row, each under
// providerd's 30 s request timeout, each lease really gone afterwards.
func TestDeprovision_FiveWorkloadsIgnoringSigterm_Answered200BeforeProviderdTimesOut(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	defer dc.Close()
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "container_stop_timeout: 30s").startInProcess() // the default (tests run with 5 s)
	stubborn := flatManifest(map[string]any{"env": map[string]string{"WORKLOAD_IGNORE_SIGTERM": "true"}})
	leases := make([]string, 5)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() { leases[i] = provisionReady(t, d, cb, stubborn) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	type answer struct {
		r    response
		took time.Duration
		done int // deprovisioned callbacks when the answer came
	}
	answers := make([]answer, len(leases))
	for i, lease := range leases {
		wg.Go(func() {
			start := time.Now()
			r := d.deprovision(lease)
			answers[i] = answer{r, time.Since(start), countStatus(cb.forLease(lease), messages.CallbackDeprovisioned)}
		})
	}
	wg.Wait()
	stillClosing := 0
	for i, a := range answers {
		if a.r.Status != http.StatusOK || string(a.r.Body) != `{"status":"ok"}`+"\n" {
			t.Errorf("close %d of a SIGTERM-ignoring workload: %d %s after %s, want 200 ok", i, a.r.Status, a.r.Body, a.took)
		}
		if a.took >= 30*time.Second {
			t.Errorf("close %d answered after %s: providerd's request had timed out", i, a.took)
		}
		if a.done == 0 {
			stillClosing++
		}
	}
	if stillClosing == 0 {
		t.Fatalf("every close had finished before its answer: the workloads did not ignore SIGTERM (answers %+v)", answers)
	}
	// The 200 was true: each lease closes, says so once, and leaves nothing.
	for _, lease := range leases {
		got := cb.waitFor(lease, 2, 2*time.Minute)
		if n := countStatus(got, messages.CallbackDeprovisioned); n != 1 {
			t.Errorf("lease %s: %d deprovisioned callbacks, want 1", lease, n)
		}
		d.waitLeaseObjectsGone(lease, time.Now().Add(time.Minute))
		if n := len(leaseContainers(t, dc, lease)); n != 0 {
			t.Errorf("lease %s: %d containers left after its close", lease, n)
		}
	}
}

func countStatus(cbs []receivedCallback, status string) int {
	n := 0
	for _, c := range cbs {
		if c.Body.Status == status {
			n++
		}
	}
	return n
}
