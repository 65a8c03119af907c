package main

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// TestCaptureFault_DiagnosticsWriteFails_FailedContainersKeptUntilWritten: a
// provision whose container exits at start, while diagnostics.db refuses every
// write: one failed callback; the exited container — the only evidence — stays
// while the capture is retried, and once diagnostics.db writes again the capture
// is stored (its logs served by /logs) and the container removed.
func TestCaptureFault_DiagnosticsWriteFails_FailedContainersKeptUntilWritten(t *testing.T) {
	// Sequential: sets testHooks.diag, which every in-process daemon reads.
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fault := &lease.FaultyDiagnostics{}
	fault.Failing.Store(true)
	testHooks.diag = func(d lease.Diagnostics) lease.Diagnostics { fault.Diagnostics = d; return fault }
	t.Cleanup(func() { testHooks.diag = nil })
	d := newDaemonDir(t).startInProcess()
	id := failedProvision(t, d, cb, flatManifest(map[string]any{"args": []string{"exit", "-code", "3", "-after", "100ms"}}),
		messages.ReasonContainerExited)

	refused := fault.Refused.Load()
	if refused == 0 {
		t.Fatal("no diagnostics write was refused: the fault was never injected")
	}
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if cs := leaseContainers(t, dc, id); len(cs) != 1 {
			t.Fatalf("%d containers of the failed attempt while its capture is unwritten, want its one kept", len(cs))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if fault.Refused.Load() <= refused {
		t.Fatalf("the capture was not retried (%d refused writes)", fault.Refused.Load())
	}

	fault.Failing.Store(false)
	gone := time.Now().Add(60 * time.Second)
	for len(leaseContainers(t, dc, id)) > 0 {
		if time.Now().After(gone) {
			t.Fatalf("the kept container still there 60 s after diagnostics.db writes again\n%s", tail(d.log.String(), 3000))
		}
		time.Sleep(250 * time.Millisecond)
	}
	var logs map[string]string
	if r := d.get("/logs/" + id); r.Status != 200 {
		t.Fatalf("logs of the failed attempt: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &logs)
	}
	if _, ok := logs["app/0"]; !ok {
		t.Fatalf("logs of the failed attempt = %v, want its capture's app/0", logs)
	}
	if n := len(cb.forLease(id)); n != 1 {
		t.Fatalf("%d callbacks for one failed provision, want 1", n)
	}
	if info := d.provisionInfo(id); info.Status != messages.StatusFailed || info.FailCount != 1 {
		t.Fatalf("provision %+v, want failed once", info)
	}
	d.closeAll(dc, id)
}
