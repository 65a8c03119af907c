package main

// callback_max_age on the real engine (issue 18 item 1): a lifecycle
// observation providerd keeps refusing no longer holds its lease's FIFO — nor
// the maintenance fence behind it — for good.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// A Ready lease dies and providerd answers 500 to its failed callback for ever.
// The lease is restarted twice meanwhile: the first restart's completion queues
// behind the refused death (the fence shut: the second restart is 409), the death
// expires after callback_max_age, and both completions are delivered, the
// expired row counted in metrics and the debug outbox.
func TestCallbackMaxAge_RefusedDeathExpires_BothRestartCompletionsDelivered(t *testing.T) {
	// Sequential: it asserts the fence is shut until the refused death expires.
	// callback_max_age 30s: the first restart must complete (while the death is
	// still refused) before it expires — 3 s was outlasted by a restart on a
	// loaded machine, and the second restart then found the fence open.
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "callback_max_age: 30s").startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	cb.mu.Lock()
	cb.refuse = func(c messages.Callback) bool {
		return c.LeaseUUID == lease && c.MaintenanceID == "" && c.Status == messages.CallbackFailed
	}
	cb.mu.Unlock()
	if err := dc.ContainerKill(t.Context(), leaseContainers(t, dc, lease)[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	d.waitStatus(lease, "failed", time.Minute)

	first, second := uuid.NewString(), uuid.NewString()
	if r := d.maintainOnce(lease, first, nil); r.Status != 202 {
		t.Fatalf("restart of the failed lease: %d %s", r.Status, r.Body)
	}
	d.waitStatus(lease, "ready", 2*time.Minute)
	fenced := false
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		r := d.maintainOnce(lease, second, nil)
		if r.Status == 202 {
			break
		}
		if r.Status != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("second restart: %d %s (the refused death should have expired)", r.Status, r.Body)
		}
		fenced = true
	}
	if !fenced {
		t.Errorf("the second restart was admitted at once: the first completion was not queued behind the refused death")
	}
	completion(t, cb, lease, 2, first, messages.CallbackSuccess)
	completion(t, cb, lease, 3, second, messages.CallbackSuccess)

	cb.mu.Lock()
	refused := len(cb.refused)
	cb.mu.Unlock()
	if refused < 2 {
		t.Errorf("the death was refused %d times, want its attempts", refused)
	}
	m := string(d.get("/metrics").Body)
	if !strings.Contains(m, `berth_callback_expired_total{kind="lifecycle"} 1`) {
		t.Errorf("expired metric:\n%s", grepLines(m, "berth_callback_expired"))
	}
	var rep messages.OutboxSummary
	if r := d.debugGet("/debug/outbox"); r.Status != 200 {
		t.Fatalf("debug outbox: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &rep)
	}
	if rep.Expired != 1 || len(rep.Dropped) != 1 || rep.Dropped[0].LeaseUUID != lease ||
		rep.Dropped[0].Reason != "expired" || rep.Dropped[0].Status != messages.CallbackFailed {
		t.Errorf("debug outbox = %+v, want the one expired death", rep)
	}
	d.closeAll(dc, lease)
}
