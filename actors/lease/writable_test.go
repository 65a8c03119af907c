package lease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

// Writable paths on the fake engine: what a read-only rootfs launch detects,
// seeds and mounts, where the scratch volumes go, and what a degraded launch
// records.

// planRecorder keeps every plan the lease launches.
type planRecorder struct {
	*gatedEngine
	mu    sync.Mutex
	plans []dockerio.Plan
}

func (r *planRecorder) Launch(ctx context.Context, plan dockerio.Plan) ([]messages.Container, error) {
	r.mu.Lock()
	r.plans = append(r.plans, plan)
	r.mu.Unlock()
	return r.gatedEngine.Launch(ctx, plan)
}

// service is the last launched plan's service name.
func (r *planRecorder) service(t *testing.T, name string) dockerio.ServicePlan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.plans) == 0 {
		t.Fatal("nothing launched")
	}
	for _, s := range r.plans[len(r.plans)-1].Services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no service %s launched", name)
	return dockerio.ServicePlan{}
}

// recordPlans makes the harness's next leases launch through a recorder, and
// has detection of the unit image find paths (or fail as given).
func recordPlans(t *testing.T, h *harness, paths []string, detectErr, seedErr error) *planRecorder {
	t.Helper()
	info, err := h.eng.ResolveImage(context.Background(), unitImage)
	if err != nil {
		t.Fatal(err)
	}
	h.eng.SetWritablePaths(info.ID, paths, detectErr, seedErr)
	rec := &planRecorder{gatedEngine: h.eng}
	h.deps.Engine.ContainersAPI = rec
	return rec
}

// A stateful instance seeds into its managed volume, a diskless one into a
// scratch volume capped at its scratch allowance; both are mounted from there,
// owned by the detected user; the close destroys the scratch volumes.
func TestLease_WritablePaths_SeededIntoVolumeAndScratch_ScratchGoneOnClose(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.MinAvgFileBytes = 4096 })
	paths := []string{"/var/lib/app", "/var/log/app"}
	rec := recordPlans(t, h, paths, nil, nil)
	db := statefulService("db", 1)
	db.Manifest.User = "1000:1001"
	l := h.start(newSpec(1, db, plainService("web", 2)))
	h.awaitReport("ready", isReady)

	seeded := h.eng.Seeded()
	slices.SortFunc(seeded, func(a, b dockerio.SeedRequest) int { return len(a.Dirs) - len(b.Dirs) })
	volume := h.vols.Root() + "/" + messages.VolumeName(l.id, "db", 0)
	if len(seeded) != 2 || !slices.Equal(seeded[0].Dirs, []string{volume}) || seeded[0].UID != 1000 || seeded[0].GID != 1001 ||
		seeded[0].MaxBytes != 512<<20 || seeded[0].MaxEntries != 512<<20/4096 || !slices.Equal(seeded[0].Paths, paths) {
		t.Fatalf("seeded %+v, want db's volume (512 MiB, as 1000:1001) first", seeded)
	}
	scratch := []string{h.vols.Root() + "/" + messages.ScratchVolumeName(l.id, "web", 0), h.vols.Root() + "/" + messages.ScratchVolumeName(l.id, "web", 1)}
	if !slices.Equal(seeded[1].Dirs, scratch) || seeded[1].MaxBytes != 64<<20 {
		t.Fatalf("web seeded %+v, want its two 64 MiB scratch volumes", seeded[1])
	}
	if q, ok := h.vols.Quota(messages.ScratchVolumeName(l.id, "web", 1)); !ok || q != 64 {
		t.Fatalf("scratch quota %d (exists %t), want the pinned 64 MB", q, ok)
	}
	if uid, gid, ok := h.vols.Owner(messages.VolumeName(l.id, "db", 0)); !ok || uid != 1000 || gid != 1001 {
		t.Fatalf("db volume owner %d:%d, want the detected 1000:1001", uid, gid)
	}
	if svc := rec.service(t, "db"); !slices.Equal(svc.WritablePaths, paths) || !slices.Equal(svc.WritableDirs, []string{volume}) || svc.UID != 1000 {
		t.Fatalf("db plan: paths %v dirs %v uid %d", svc.WritablePaths, svc.WritableDirs, svc.UID)
	}
	if svc := rec.service(t, "web"); !slices.Equal(svc.WritableDirs, scratch) {
		t.Fatalf("web plan: dirs %v, want its scratch volumes", svc.WritableDirs)
	}
	if why := degradedOf(l.state().Containers); why != "" {
		t.Fatalf("a clean launch recorded degraded: %q", why)
	}
	if err := awaitReply(t, "deprovision", l.deprovision(), unitWait); err != nil {
		t.Fatal(err)
	}
	if got := h.vols.Names(); len(got) != 0 {
		t.Fatalf("volumes %v remain after the close", got)
	}
}

// A writable rootfs needs no writable paths: nothing is detected or seeded.
func TestLease_WritableRootfs_NoDetection(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ReadonlyRootfs = false })
	rec := recordPlans(t, h, []string{"/var/lib/app"}, nil, nil)
	h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	if n := h.eng.Calls(fake.OpDetectWritable); n != 0 {
		t.Fatalf("%d detections under a writable rootfs", n)
	}
	if svc := rec.service(t, "app"); len(svc.WritablePaths) != 0 {
		t.Fatalf("writable paths %v under a writable rootfs", svc.WritablePaths)
	}
}

// A launch whose detection or seeding failed goes on (tmpfs, or nothing), says
// so in the debug view and the failure's diagnostics, and a death of its
// cohort is never counted against the terminal budget.
func TestLease_DegradedLaunch_ReadyUncountedAndSaid(t *testing.T) {
	for _, c := range []struct {
		name                string
		detectErr, seedErr  error
		want                string
		paths, mountedPaths []string
	}{
		{"detection failed", errors.New("scan refused"), nil, "writable-path detection failed: detect writable paths: scan refused", nil, nil},
		{"seeding failed", nil, errors.New("disk full"), "writable paths not seeded (empty tmpfs instead): seed writable paths: disk full",
			[]string{"/var/lib/app"}, []string{"/var/lib/app"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			rec := recordPlans(t, h, []string{"/var/lib/app"}, c.detectErr, c.seedErr)
			l := h.start(newSpec(1))
			h.awaitReport("ready", isReady)
			svc := rec.service(t, "app")
			if !slices.Equal(svc.WritablePaths, c.mountedPaths) || len(svc.WritableDirs) != 0 {
				t.Fatalf("plan: paths %v dirs %v, want %v on tmpfs", svc.WritablePaths, svc.WritableDirs, c.mountedPaths)
			}
			st := l.state()
			dbg := lease.DebugServicesForTest(newSpec(1), st)
			if why := st.Containers[0].Degraded; !strings.Contains(why, c.want) || dbg[0].Instances[0].Degraded != why {
				t.Fatalf("instance degraded %q, debug %+v; want %q", why, dbg, c.want)
			}
			ctr := l.containers()[0]
			if err := h.eng.Kill(ctr.ID, 1); err != nil {
				t.Fatal(err)
			}
			l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 1, Counted: true})
			if f := payload[lease.RuntimeFailing](t, l.waitEvent(lease.EvRuntimeFailing)); f.Counted {
				t.Fatalf("a death after a degraded launch counted: %+v", f)
			}
			l.waitEvent(lease.EvRuntimeFailed)
			if st := l.state(); st.Budget.Streak != 0 {
				t.Fatalf("streak %d after a degraded launch's death, want 0", st.Budget.Streak)
			}
			capt, err := lease.LatestCapture(h.diag, l.id)
			if err != nil || capt == nil || !strings.Contains(capt.Degraded, c.want) {
				t.Fatalf("capture %+v, %v; want degraded %q", capt, err, c.want)
			}
		})
	}
}

// degradedOf is why a journaled cohort's launch was degraded.
func degradedOf(insts []lease.Instance) string {
	for _, i := range insts {
		if i.Degraded != "" {
			return i.Degraded
		}
	}
	return ""
}
