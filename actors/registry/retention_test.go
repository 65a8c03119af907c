package registry

// Retention records and restores through the real registry and lease actors, on
// the fake engine and fake volumes: a retaining close, the caps, a restore's
// rules (ownership, shape, tier), its commit and hand-back, and the reaper's
// protocol (expiry → reaping → deleted). Real btrfs volumes: cmd/berthd.

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

func retaining(s *Settings) {
	s.RetainOnClose = true
	s.SKUProfiles["docker-mini"] = s.SKUProfiles["docker-small"]
	mini := s.SKUProfiles["docker-mini"]
	mini.DiskMB = 64
	s.SKUProfiles["docker-mini"] = mini
}

func (h *harness) restore(req messages.RestoreRequest) error {
	h.t.Helper()
	return ask(h, patience, func(r chan<- error) any { return &messages.Restore{Req: req, Reply: r} })
}

func (h *harness) retentions() []messages.Retention {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.RetentionsReply) any { return &messages.ListRetentions{Reply: r} }).Retentions
}

func restoreRequest(dest, from, tenant, sku string) messages.RestoreRequest {
	return messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: from, Tenant: tenant, ProviderUUID: "provider-test",
		Items: []messages.LeaseItem{{SKU: sku, Quantity: 1}}, CallbackURL: "http://127.0.0.1:9/callbacks/provision?operation_id=" + uuid.NewString()}
}

// retainedLease provisions a stateful lease, fills its volume and closes it retaining.
func (h *harness) retainedLease(used int64) string {
	h.t.Helper()
	id := uuid.NewString()
	h.provisionReady(id, "docker-small", 1)
	h.vols.Fill(messages.VolumeName(id, "app", 0), used)
	if err := h.deprovision(id); err != nil {
		h.t.Fatalf("deprovision %s: %v", id, err)
	}
	h.eventually("the retention record", func() bool {
		r := h.get(id)
		return r.Info != nil && r.Info.Status == messages.StatusRetained
	})
	return id
}

func TestRetention_CloseRetains_ListedShownCountedInThePool(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	id := h.retainedLease(10 << 20)
	got := h.retentions()
	if len(got) != 1 || got[0].LeaseUUID != id || got[0].Status != RetentionActive || got[0].DiskMB != 256 || got[0].UsedBytes != 10<<20 {
		t.Fatalf("retentions %+v", got)
	}
	if info := h.get(id).Info; info.Status != messages.StatusRetained || info.RetainedUntil.IsZero() || info.Tenant != "fred1tenant" {
		t.Fatalf("provision view %+v", info)
	}
	if s := h.stats(); s.AllocatedDiskMB != 256 || s.RetainedDiskMB != 256 {
		t.Fatalf("stats %+v: the retained 256 MB must stay counted", s)
	}
	h.assertPoolInvariant()
	if names := h.vols.Names(); len(names) != 1 || names[0] != messages.RetainedVolumeName(id, "app", 0) {
		t.Fatalf("volumes %v", names)
	}
}

func TestRetention_Caps_TenantEvictsOldest_DiskCapDestroysInstead(t *testing.T) {
	t.Run("per tenant", func(t *testing.T) {
		h := newHarness(t, func(s *Settings) { retaining(s); s.MaxRetainedPerTenant = 1 })
		h.recovered()
		first := h.retainedLease(0)
		second := h.retainedLease(0)
		reaping := h.get(first).Info
		if r := h.retentions(); len(r) != 2 {
			t.Fatalf("retentions %+v", r)
		}
		st, _ := h.journal()
		if st.Retentions[first].Status != RetentionReaping || st.Retentions[first].Reason != "evicted" ||
			st.Retentions[second].Status != RetentionActive {
			t.Fatalf("after the second close: first %+v, second %+v (view %+v)", st.Retentions[first], st.Retentions[second], reaping)
		}
	})
	t.Run("retained disk", func(t *testing.T) {
		h := newHarness(t, func(s *Settings) { retaining(s); s.MaxRetainedDiskMB = 300 })
		h.recovered()
		h.retainedLease(0)
		id := uuid.NewString()
		h.provisionReady(id, "docker-small", 1)
		if err := h.deprovision(id); err != nil {
			t.Fatal(err)
		}
		if r := h.get(id); r.Err == nil {
			t.Fatalf("a close over the retained-disk cap retained: %+v", r.Info)
		}
		if n := len(h.vols.Names()); n != 1 {
			t.Fatalf("%d volumes: the over-cap close must destroy its data", n)
		}
	})
}

func TestRestore_Rules_OwnershipShapeTier(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	src := h.retainedLease(100 << 20) // 100 MiB used
	for _, c := range []struct {
		name string
		req  messages.RestoreRequest
		want error
	}{
		{"unknown source", restoreRequest(uuid.NewString(), uuid.NewString(), "fred1tenant", "docker-small"), messages.ErrNotRetained},
		{"another tenant's", restoreRequest(uuid.NewString(), src, "fred1other", "docker-small"), messages.ErrNotRetained},
		{"changed shape", func() messages.RestoreRequest {
			r := restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-small")
			r.Items[0].Quantity = 2
			return r
		}(), messages.ErrInvalidManifest},
		{"demote below the data", restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-mini"), messages.ErrDemoteExceedsTier},
		{"into a diskless tier", restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-tiny"), messages.ErrDemoteExceedsTier},
		{"unknown sku", restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-nope"), messages.ErrUnknownSKU},
		{"non-canonical", restoreRequest("X", src, "fred1tenant", "docker-small"), messages.ErrBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := h.restore(c.req); !errors.Is(err, c.want) {
				t.Fatalf("restore: %v, want %v", err, c.want)
			}
		})
	}
	if st, _ := h.journal(); st.Retentions[src].Status != RetentionActive {
		t.Fatalf("a refused restore changed the record: %+v", st.Retentions[src])
	}
	h.assertPoolInvariant()
}

func TestRestore_PromoteCommits_RecordConsumed(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	src := h.retainedLease(100 << 20)
	dest := uuid.NewString()
	if err := h.restore(restoreRequest(dest, src, "fred1tenant", "docker-big")); err != nil {
		t.Fatalf("restore: %v", err)
	}
	h.waitStatus(dest, messages.StatusReady)
	h.eventually("the record consumed", func() bool { st, _ := h.journal(); return st.Retentions[src] == nil })
	if q, _ := h.vols.Quota(messages.VolumeName(dest, "app", 0)); q != 1024 {
		t.Fatalf("restored volume quota %d, want the promoted 1024", q)
	}
	if r := h.restore(restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-small")); !errors.Is(r, messages.ErrNotRetained) {
		t.Fatalf("a consumed record restored again: %v", r)
	}
	h.assertPoolInvariant()
}

func TestRestore_FailsBeforeCommit_RecordActiveAgain(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	src := h.retainedLease(0)
	dest := uuid.NewString()
	h.eng.RefuseNextStart(errors.New("injected: start refused"))
	if err := h.restore(restoreRequest(dest, src, "fred1tenant", "docker-small")); err != nil {
		t.Fatalf("restore: %v", err)
	}
	h.waitStatus(dest, messages.StatusFailed)
	h.eventually("the record released", func() bool { st, _ := h.journal(); return st.Retentions[src].Status == RetentionActive })
	if names := h.vols.Names(); len(names) != 1 || names[0] != messages.RetainedVolumeName(src, "app", 0) {
		t.Fatalf("volumes %v: the data must be back under its retained name", names)
	}
	h.assertPoolInvariant()
}

func TestRetention_Sweep_ExpiredReapedThenDeleted_BytesFreedOnlyThen(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	id := h.retainedLease(0)
	until := h.get(id).Info.RetainedUntil
	sweep := func(at time.Time) messages.RetentionSweepReply {
		return ask(h, 10*time.Second, func(r chan<- messages.RetentionSweepReply) any {
			return &messages.RetentionSweep{Now: at, Reply: r}
		})
	}
	if rep := sweep(time.Now()); len(rep.Reaping) != 0 || len(rep.Active) != 1 {
		t.Fatalf("sweep before expiry %+v", rep)
	}
	if until.IsZero() {
		t.Fatal("the record has no retained_until")
	}
	rep := sweep(until.Add(time.Second))
	if len(rep.Reaping) != 1 || rep.Reaping[0].Lease != id {
		t.Fatalf("sweep after expiry %+v", rep)
	}
	if s := h.stats(); s.RetainedDiskMB != 256 {
		t.Fatalf("stats %+v: reaping bytes stay counted until the volumes are gone", s)
	}
	h.tree.Send(regPath, &messages.RetentionReaped{Lease: id})
	h.eventually("the record deleted", func() bool { st, _ := h.journal(); return st.Retentions[id] == nil })
	if s := h.stats(); s.AllocatedDiskMB != 0 {
		t.Fatalf("stats %+v after the reap", s)
	}
}

// TestRestore_Exclusive_SecondRestoreRefused_RestoringRecordNeverReaped: while a
// restore holds a record, a second restore of the same source is refused as
// invalid state (the bare 409), and a sweep long past the record's grace does not
// reap it: the data is the destination's to commit or hand back.
func TestRestore_Exclusive_SecondRestoreRefused_RestoringRecordNeverReaped(t *testing.T) {
	h := newHarness(t, retaining)
	h.recovered()
	src := h.retainedLease(0)
	until := h.get(src).Info.RetainedUntil
	h.eng.Delay(fake.OpUp, 2*time.Second) // the destination stays before its commit a while
	dest := uuid.NewString()
	if err := h.restore(restoreRequest(dest, src, "fred1tenant", "docker-small")); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := h.restore(restoreRequest(uuid.NewString(), src, "fred1tenant", "docker-small")); !errors.Is(err, messages.ErrInvalidState) {
		t.Fatalf("a second restore of a restoring source: %v, want ErrInvalidState", err)
	}
	rep := ask(h, 10*time.Second, func(r chan<- messages.RetentionSweepReply) any {
		return &messages.RetentionSweep{Now: until.Add(time.Hour), Reply: r}
	})
	if len(rep.Reaping) != 0 {
		t.Fatalf("a sweep past the grace reaps the restoring record: %+v", rep.Reaping)
	}
	if st, _ := h.journal(); st.Retentions[src] == nil || st.Retentions[src].Status != RetentionRestoring {
		t.Fatalf("record %+v, want restoring", st.Retentions[src])
	}
	h.waitStatus(dest, messages.StatusReady)
	h.eventually("the record consumed", func() bool { st, _ := h.journal(); return st.Retentions[src] == nil })
	if names := h.vols.Names(); len(names) != 1 || names[0] != messages.VolumeName(dest, "app", 0) {
		t.Fatalf("volumes %v, want only the destination's", names)
	}
	h.assertPoolInvariant()
}
