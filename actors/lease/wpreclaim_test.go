package lease_test

import (
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// A retaining close on the fake volume root: volumes holding only writable-path
// copies are destroyed instead of retained, by a verdict journaled before any
// volume is touched and carried out as journaled, whatever the volume holds by
// the time a later run of the close gets to it.

const unitNoVolumeImage = "127.0.0.1:5000/berth/unit-novolume:1"

// noVolumeService is a stateful service whose image declares no VOLUME.
func noVolumeService(h *harness, name string, quantity int) lease.ServiceSpec {
	h.eng.AddImage(unitNoVolumeImage, dockerio.ImageInfo{})
	s := statefulService(name, quantity)
	s.Manifest.Image = unitNoVolumeImage
	return s
}

var wpTree = dockerio.VolumeEntry{Name: dockerio.WritableRoot, Dir: true}

func TestLease_CloseRetaining_WritablePathOnlyVolumes_NothingRetained(t *testing.T) {
	h := newHarness(t, nil)
	l := h.start(newSpec(1, noVolumeService(h, "web", 2)))
	h.awaitReport("ready", isReady)
	names := []string{messages.VolumeName(l.id, "web", 0), messages.VolumeName(l.id, "web", 1)}
	h.vols.PutEntry(names[0], wpTree) // seeded; web/1's writable paths were never seeded: empty
	if err := awaitReply(t, "deprovision", l.deprovisionRetaining(), unitWait); err != nil {
		t.Fatal(err)
	}
	if got := h.vols.Names(); len(got) != 0 {
		t.Fatalf("volumes %v remain; want both reclaimed", got)
	}
	judged := payload[lease.CloseJudged](t, l.waitEvent(lease.EvCloseJudged))
	closed := payload[lease.ClosedEv](t, l.waitEvent(lease.EvClosed))
	if len(judged.Reclaim) != 2 || closed.Retention != nil || len(closed.Reclaimed) != 2 {
		t.Fatalf("verdict %+v, closed %+v: want both reclaimed, no retention record", judged, closed)
	}
	if rows := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned)); rows[1].Retained {
		t.Fatalf("the deprovisioned callback says retained")
	}
	if got := <-h.closed; got.Retention != nil {
		t.Fatalf("the registry was told of a retention record %+v", got.Retention)
	}
}

// A lease whose services differ keeps exactly the volume with data: the
// record holds the VOLUME service's, the writable-path-only one is destroyed.
func TestLease_CloseRetaining_MixedLease_RecordKeepsOnlyTheVolumeWithData(t *testing.T) {
	h := newHarness(t, nil)
	l := h.start(newSpec(1, statefulService("db", 1), noVolumeService(h, "web", 1)))
	h.awaitReport("ready", isReady)
	web := messages.VolumeName(l.id, "web", 0)
	h.vols.PutEntry(web, wpTree)
	h.vols.PutEntry(messages.VolumeName(l.id, "db", 0), wpTree) // data/ and _wp/: data
	if err := awaitReply(t, "deprovision", l.deprovisionRetaining(), unitWait); err != nil {
		t.Fatal(err)
	}
	retained := messages.RetainedVolumeName(l.id, "db", 0)
	if got := h.vols.Names(); len(got) != 1 || got[0] != retained {
		t.Fatalf("volumes %v, want only %s", got, retained)
	}
	closed := payload[lease.ClosedEv](t, l.waitEvent(lease.EvClosed))
	if closed.Retention == nil || len(closed.Retention.Volumes) != 1 || closed.Retention.Volumes[0].Service != "db" ||
		len(closed.Reclaimed) != 1 || closed.Reclaimed[0] != web {
		t.Fatalf("closed %+v: want a record of db alone, web reclaimed", closed)
	}
	if rows := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned)); !rows[1].Retained {
		t.Fatalf("the deprovisioned callback says not retained")
	}
}

// The verdict is the journal's: a close interrupted after it (its destroy
// refused busy, then the actor crashed) finishes as judged even though the
// volume now holds a directory a fresh judgement would keep, and is judged
// once.
func TestLease_CloseRetaining_CrashAfterVerdict_CarriedOutAsJournaled(t *testing.T) {
	h := newHarness(t, nil)
	l := h.start(newSpec(1, noVolumeService(h, "web", 1)))
	h.awaitReport("ready", isReady)
	name := messages.VolumeName(l.id, "web", 0)
	h.vols.PutEntry(name, wpTree)
	h.vols.SetBusy(name, -1)
	l.deprovisionRetaining() // its answer is lost with the crashed incarnation; the journal tells
	l.waitEvent(lease.EvCloseJudged)
	h.waitFor("the reclaim to be refused busy", func() bool { return h.vols.Calls("destroy") >= 1 })
	h.vols.PutEntry(name, dockerio.VolumeEntry{Name: "data", Dir: true})
	l.send(&messages.Crash{})
	h.waitFor("the lease actor to restart", func() bool { return l.restarts() >= 1 })
	h.vols.SetBusy(name, 0)
	closed := payload[lease.ClosedEv](t, l.waitEvent(lease.EvClosed))
	if got := h.vols.Names(); len(got) != 0 {
		t.Fatalf("volumes %v remain; the journaled verdict reclaims %s", got, name)
	}
	if n := count(l.events(), lease.EvCloseJudged); n != 1 {
		t.Fatalf("%d verdicts journaled, want 1", n)
	}
	if closed.Retention != nil || len(closed.Reclaimed) != 1 {
		t.Fatalf("closed %+v: retained what the verdict reclaimed", closed)
	}
}

// A restore that never committed hands its adopted volume back and destroys
// the volumes it made itself (writable-path-only ones its record did not keep).
func TestLease_RestoreClosedBeforeCommit_OwnVolumesDestroyedAdoptedHandedBack(t *testing.T) {
	h := newHarness(t, nil)
	spec := restoreSpec("00000000-0000-4000-8000-000000000001")
	spec.Services = append(spec.Services, noVolumeService(h, "web", 1))
	retained := spec.Restore.Volumes[0].Retained
	if _, err := h.vols.Ensure(t.Context(), retained, 256, []string{"data"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	h.eng.Hold("up")
	l := h.start(spec)
	h.waitFor("the restore to make its own volume", func() bool {
		ok, _ := h.vols.Exists(t.Context(), messages.VolumeName(l.id, "web", 0))
		return ok
	})
	if err := awaitReply(t, "deprovision", l.deprovisionRetaining(), unitWait); err != nil {
		t.Fatal(err)
	}
	if got := h.vols.Names(); len(got) != 1 || got[0] != retained {
		t.Fatalf("volumes %v, want only the handed-back %s", got, retained)
	}
	h.eng.releaseAll()
}
