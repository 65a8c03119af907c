package fake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

const (
	lease        = "11111111-2222-3333-4444-555555555555"
	installation = "inst-1"
	image        = "127.0.0.1:5000/app:1"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stack prepares an image, the lease network and a web×2 → db (service_healthy) plan.
func stack(t *testing.T, e *Engine) dockerio.Plan {
	t.Helper()
	info := e.AddImage(image, dockerio.ImageInfo{Volumes: []string{"/data"}})
	id, err := e.EnsureNetwork(ctxT(t), dockerio.NetworkSpec{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation})
	if err != nil {
		t.Fatal(err)
	}
	svc := func(name string, q int) dockerio.ServicePlan {
		return dockerio.ServicePlan{Service: manifest.Service{Image: image, Ports: map[string]manifest.Port{"8080/tcp": {}}},
			Name: name, SKU: "s", Quantity: q, CPUCores: 1, MemoryMB: 64, ImageID: info.ID, ImageVolumes: info.Volumes}
	}
	db := svc("db", 1)
	db.DiskMB = 10
	db.VolumeDirs = []string{"/var/lib/berth/volumes/" + messages.VolumeName(lease, "db", 0)}
	db.HealthCheck = &manifest.HealthCheck{Test: []string{"CMD", "probe"}}
	web := svc("web", 2)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: manifest.ConditionHealthy}}
	return dockerio.Plan{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation, OperationID: "op1",
		Generation: 1, NetworkID: id, HostBindIP: "127.0.0.1", ReadonlyRootfs: true, Services: []dockerio.ServicePlan{db, web}}
}

func TestImages_ResolvePinnedAdmission_MirrorTheRealEngine(t *testing.T) {
	e := New(Options{InstallationID: installation})
	ctx := ctxT(t)
	if _, err := e.ResolveImage(ctx, image); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("ResolveImage(missing) = %v", err)
	}
	if _, err := e.InspectImage(ctx, image); !errdefs.IsNotFound(err) {
		t.Errorf("InspectImage(missing) = %v", err)
	}
	added := e.AddImage(image, dockerio.ImageInfo{Volumes: []string{"/b", "/a"}, User: "app"})
	if !strings.HasPrefix(added.ID, "sha256:") || !strings.HasPrefix(added.Digest, "127.0.0.1:5000/app@sha256:") {
		t.Fatalf("AddImage = %+v, want an ID and a repo@sha256 digest", added)
	}
	got, err := e.ResolveImage(ctx, image)
	if err != nil || got.ID != added.ID || got.Digest != added.Digest || got.User != "app" || !slices.Equal(got.Volumes, []string{"/a", "/b"}) {
		t.Errorf("ResolveImage = %+v, %v", got, err)
	}
	if byDigest, err := e.ResolveImage(ctx, added.Digest); err != nil || byDigest.ID != added.ID {
		t.Errorf("ResolveImage(digest) = %+v, %v", byDigest, err)
	}
	if _, err := e.ResolveImage(ctx, added.ID); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("ResolveImage(image ID) = %v, want ErrImagePull", err)
	}
	if i, err := e.InspectImage(ctx, added.ID); err != nil || i.ID != added.ID {
		t.Errorf("InspectImage(by ID) = %+v, %v", i, err)
	}
	pin := got.Pin(image)

	// The registry is down: the tag is never served from what is present, a
	// present pin still is.
	e.SetRegistryDown(image, true)
	if _, err := e.ResolveImage(ctx, image); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("ResolveImage(registry down, content present) = %v, want ErrImagePull", err)
	}
	if p, err := e.PinnedImage(ctx, pin); err != nil || p.ID != pin.ID {
		t.Errorf("PinnedImage(present, registry down) = %+v, %v", p, err)
	}
	e.RemoveLocalImage(pin.ID)
	if _, err := e.PinnedImage(ctx, pin); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PinnedImage(absent, registry down) = %v, want ErrImagePull", err)
	}
	e.SetRegistryDown(image, false)

	// The tag moves: ResolveImage follows it, the old pin keeps the old content.
	moved := e.MoveTag(image, dockerio.ImageInfo{Volumes: []string{"/srv"}})
	if now, err := e.ResolveImage(ctx, image); err != nil || now.ID != moved.ID || now.Digest != moved.Digest {
		t.Errorf("ResolveImage(moved) = %+v, %v; want %s", now, err, moved.ID)
	}
	if old, err := e.PinnedImage(ctx, pin); err != nil || old.ID != pin.ID || !slices.Equal(old.Volumes, []string{"/a", "/b"}) {
		t.Errorf("PinnedImage(old pin after move) = %+v, %v", old, err)
	}
	wrong := pin
	wrong.ID = moved.ID
	wrong.Digest = pin.Digest
	e.RemoveLocalImage(moved.ID)
	if _, err := e.PinnedImage(ctx, wrong); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PinnedImage(digest of other content) = %v, want ErrImagePull", err)
	}
	if _, err := e.PinnedImage(ctx, messages.ImagePin{Ref: image, ID: "sha256:" + strings.Repeat("0", 64)}); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PinnedImage(absent, no digest) = %v", err)
	}
	e.RemoveImage(image)
	if _, err := e.ResolveImage(ctx, image); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("ResolveImage(withdrawn tag) = %v", err)
	}

	// Admission: the same rules as the real engine.
	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf("/v%d", i)
	}
	e.AddImage("many", dockerio.ImageInfo{Volumes: many})
	e.AddImage("masks-proc", dockerio.ImageInfo{Volumes: []string{"/proc/x"}})
	for _, ref := range []string{"many", "masks-proc"} {
		if _, err := e.ResolveImage(ctx, ref); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
			t.Errorf("ResolveImage(%s) = %v, want ErrImageNotAdmissible", ref, err)
		}
	}
	e.AddLabelledImage("reserved", dockerio.ImageInfo{}, map[string]string{"fred.tenant": "x", "ok": "1"})
	if _, err := e.ResolveImage(ctx, "reserved"); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("ResolveImage(reserved) = %v, want ErrImageNotAdmissible", err)
	}
	labelled := e.AddLabelledImage("labelled", dockerio.ImageInfo{}, map[string]string{"com.docker.compose.project": "p", "ok": "1"})
	if info, err := e.ResolveImage(ctx, "labelled"); err != nil || !slices.Equal(info.MaskLabels, []string{"com.docker.compose.project"}) || !slices.Equal(labelled.MaskLabels, info.MaskLabels) {
		t.Errorf("ResolveImage(labelled) = %+v, %v", info, err)
	}
	if e.Calls(OpResolveImage) != e.Calls(OpPullImage) || e.Calls(OpPinnedImage) == 0 {
		t.Errorf("calls: resolve %d (pull alias %d) pinned %d", e.Calls(OpResolveImage), e.Calls(OpPullImage), e.Calls(OpPinnedImage))
	}
}

func TestEnsureNetwork_IdempotentOwnedAndForeignRefused(t *testing.T) {
	e := New(Options{InstallationID: installation})
	ctx := ctxT(t)
	spec := dockerio.NetworkSpec{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation}
	a, err := e.EnsureNetwork(ctx, spec)
	b, err2 := e.EnsureNetwork(ctx, spec)
	if err != nil || err2 != nil || a != b {
		t.Fatalf("EnsureNetwork twice = %s, %s (%v, %v)", a, b, err, err2)
	}
	n, err := e.InspectNetwork(ctx, a)
	if err != nil || n.Name != "fred-"+lease || !labels.HasAll(n.Labels, labels.Network(spec)) {
		t.Errorf("InspectNetwork = %+v, %v", n, err)
	}
	other := spec
	other.Lease = "99999999-2222-3333-4444-555555555555"
	e.AddForeignNetwork("fred-" + other.Lease)
	if _, err := e.EnsureNetwork(ctx, other); !errors.Is(err, dockerio.ErrForeignNetwork) {
		t.Errorf("EnsureNetwork over foreign = %v", err)
	}
	nets, _ := e.LeaseNetworks(ctx)
	if len(nets) != 1 || nets[0].ID != a {
		t.Errorf("LeaseNetworks = %+v", nets)
	}
	if err := e.RemoveNetwork(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNetwork(ctx, a); err != nil {
		t.Errorf("RemoveNetwork again = %v", err)
	}
	if _, err := e.InspectNetwork(ctx, a); !errdefs.IsNotFound(err) {
		t.Errorf("InspectNetwork(removed) = %v", err)
	}
}

func TestUp_CohortAttributedLabelledStartingThenHealthy_StartEvents(t *testing.T) {
	e := New(Options{HealthyAfter: 50 * time.Millisecond, InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	events, _ := e.Events(ctx)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatalf("Up: %v", err)
	}
	cohort, err := e.Cohort(ctx, lease)
	if err != nil || len(cohort) != 3 {
		t.Fatalf("Cohort = %v, %v", cohort, err)
	}
	want := []string{"db/0", "web/0", "web/1"}
	for i, c := range cohort {
		if got := fmt.Sprintf("%s/%d", c.Service, c.Index); got != want[i] || c.State != "running" || c.Generation != 1 {
			t.Errorf("cohort[%d] = %s %s gen %d", i, got, c.State, c.Generation)
		}
		fred := labels.Container(plan, plan.Services[0], c.Index, time.Now())
		for k := range fred {
			if _, ok := c.Labels[k]; !ok {
				t.Errorf("%s lacks label %s", c.Name, k)
			}
		}
		if c.Ports["8080/tcp"].HostIP != "127.0.0.1" || c.Ports["8080/tcp"].HostPort == "" {
			t.Errorf("%s ports %v", c.Name, c.Ports)
		}
	}
	if cohort[0].Health != "starting" {
		t.Errorf("db health right after Up = %q, want starting", cohort[0].Health)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _ := e.Inspect(ctx, cohort[0].ID)
		if c.Health == "healthy" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("db never became healthy: %q", c.Health)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		if ev := <-events; ev.Action != "start" || ev.Lease != lease {
			t.Errorf("event %d = %+v, want start", i, ev)
		}
	}
	// Same plan again: nothing replaced.
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	again, _ := e.Cohort(ctx, lease)
	for i := range again {
		if again[i].ID != cohort[i].ID {
			t.Errorf("second Up replaced %s", again[i].Name)
		}
	}
	// A new generation replaces everything.
	plan.Generation, plan.OperationID = 2, "op2"
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	next, _ := e.Cohort(ctx, lease)
	for i := range next {
		if next[i].ID == cohort[i].ID || next[i].Generation != 2 {
			t.Errorf("generation 2 kept %s", next[i].Name)
		}
	}
}

func TestUp_FailNextUpOnce_UnhealthyDependencyFails_VanishedNetworkFails(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	boom := errors.New("boom")
	e.FailNextUp(boom)
	if err := e.Up(ctx, plan); !errors.Is(err, boom) {
		t.Errorf("Up after FailNextUp = %v", err)
	}
	if cs, _ := e.Cohort(ctx, lease); len(cs) != 0 {
		t.Errorf("failed Up created %d containers", len(cs))
	}

	e.PinHealth(lease, "db", "unhealthy")
	if err := e.Up(ctx, plan); err == nil || !strings.Contains(err.Error(), "unhealthy") {
		t.Errorf("Up with an unhealthy service_healthy dependency = %v", err)
	}
	cs, _ := e.Cohort(ctx, lease)
	for _, c := range cs {
		if c.Service == "web" && c.State != "created" {
			t.Errorf("web is %s although its dependency is unhealthy", c.State)
		}
	}

	if err := e.Down(ctx, lease, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNetwork(ctx, plan.NetworkID); err != nil {
		t.Fatal(err)
	}
	if err := e.Up(ctx, plan); !errdefs.IsNotFound(err) {
		t.Errorf("Up on a removed network = %v", err)
	}
}

func TestKillAndDown_EmitDieEvents_DownKeepsNetwork(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	events, errc := e.Events(ctx)
	cohort, _ := e.Cohort(ctx, lease)
	if err := e.Kill(cohort[1].ID, 3); err != nil {
		t.Fatal(err)
	}
	if kill, die := <-events, <-events; kill.Action != "kill" || die.Action != "die" || die.ExitCode != 3 || die.Service != "web" {
		t.Errorf("Kill events = %+v, %+v", kill, die)
	}
	if c, _ := e.Inspect(ctx, cohort[1].ID); c.State != "exited" || c.ExitCode != 3 || c.FinishedAt.IsZero() {
		t.Errorf("killed container = %+v", c)
	}
	if err := e.OOMKill(cohort[2].ID); err != nil {
		t.Fatal(err)
	}
	if oom := <-events; oom.Action != "oom" {
		t.Errorf("OOMKill first event = %+v", oom)
	}
	<-events
	<-events

	if err := e.Down(ctx, lease, dockerio.DownOptions{RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	if kill, die := <-events, <-events; kill.Action != "kill" || die.Action != "die" || die.ContainerID != cohort[0].ID {
		t.Errorf("Down of the running db: %+v, %+v", kill, die)
	}
	if cs, _ := e.Cohort(ctx, lease); len(cs) != 0 {
		t.Errorf("after Down: %d containers", len(cs))
	}
	if _, err := e.InspectNetwork(ctx, plan.NetworkID); err != nil {
		t.Errorf("Down removed the network: %v", err)
	}
	if err := e.Down(ctx, lease, dockerio.DownOptions{}); err != nil {
		t.Errorf("second Down = %v", err)
	}
	select {
	case err := <-errc:
		t.Errorf("stream ended: %v", err)
	default:
	}
}

func TestEvents_OtherInstallationFiltered_CtxEndClosesWithCtxErr_Break(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	mine, mineErr := e.Events(ctx)
	other, otherErr := e.Events(context.Background())
	foreign := e.AddForeignContainer("99999999-2222-3333-4444-555555555555", "app", 0, "inst-other")
	if err := e.Up(ctxT(t), plan); err != nil {
		t.Fatal(err)
	}
	if ev := <-mine; ev.Action != "start" || ev.ContainerID == foreign {
		t.Errorf("first event = %+v, want our start, never the other installation's", ev)
	}
	cancel()
	if err := <-mineErr; !errors.Is(err, context.Canceled) {
		t.Errorf("stream end = %v, want context.Canceled", err)
	}
	for range mine {
	}
	e.BreakEvents(errors.New("connection reset"))
	for ev := range other {
		if ev.ContainerID == foreign {
			t.Errorf("another installation's event delivered: %+v", ev)
		}
	}
	if err := <-otherErr; err == nil || err.Error() != "connection reset" {
		t.Errorf("broken stream end = %v", err)
	}
}

func TestDelayAndUnavailable(t *testing.T) {
	e := New(Options{InstallationID: installation})
	e.Delay(OpPing, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := e.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("delayed Ping = %v", err)
	}
	e.Delay(OpPing, 0)
	e.SetUnavailable(true)
	if err := e.Ping(ctxT(t)); !errors.Is(err, dockerio.ErrUnavailable) {
		t.Errorf("Ping while unavailable = %v", err)
	}
	_, errc := e.Events(ctxT(t))
	if err := <-errc; !errors.Is(err, dockerio.ErrUnavailable) {
		t.Errorf("Events while unavailable = %v", err)
	}
	e.SetUnavailable(false)
	if err := e.Ping(ctxT(t)); err != nil || e.Calls(OpPing) != 3 {
		t.Errorf("Ping = %v, calls %d", err, e.Calls(OpPing))
	}
}

func TestLogs_TailAndByteCap(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	cs, _ := e.Cohort(ctx, lease)
	var lines []string
	for i := 1; i <= 100; i++ {
		lines = append(lines, fmt.Sprintf("line %03d", i)) // 8 bytes + newline
	}
	if err := e.AppendLogs(cs[0].ID, lines...); err != nil {
		t.Fatal(err)
	}
	text, truncated, err := e.Logs(ctx, cs[0].ID, 3, 1000)
	if err != nil || truncated || text != "line 098\nline 099\nline 100\n" {
		t.Errorf("Logs(tail 3) = %q, %v, %v", text, truncated, err)
	}
	text, truncated, _ = e.Logs(ctx, cs[0].ID, 100, 20)
	if !truncated || text != "line 099\nline 100\n" {
		t.Errorf("Logs(cap 20) = %q, %v", text, truncated)
	}
	if _, _, err := e.Logs(ctx, "nope", 1, 1); !errdefs.IsNotFound(err) {
		t.Errorf("Logs(unknown) = %v", err)
	}
}

func TestListManaged_OnlyInstallation_ListView(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	cs, _ := e.Cohort(ctx, lease)
	_ = e.Kill(cs[0].ID, 1)
	list, err := e.ListManaged(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("ListManaged = %d, %v", len(list), err)
	}
	if list[0].State != "exited" || list[0].Health != "" || !list[0].FinishedAt.IsZero() {
		t.Errorf("list view of an exited container = %+v", list[0])
	}
	e.AddForeignContainer(lease, "web", 0, "inst-other")
	if again, _ := e.ListManaged(ctx); len(again) != 3 {
		t.Errorf("ListManaged lists %d, want only our 3", len(again))
	}
}

// Hammer the fake from many goroutines; -race proves it is safe.
func TestConcurrentUse_RaceFree(t *testing.T) {
	e := New(Options{HealthyAfter: time.Millisecond, InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	events, _ := e.Events(ctx)
	go func() {
		for range events {
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				_ = e.Up(ctx, plan)
				cs, _ := e.Cohort(ctx, lease)
				for _, c := range cs {
					_ = e.Kill(c.ID, 1)
					_, _ = e.Inspect(ctx, c.ID)
				}
				_, _ = e.ListManaged(ctx)
				_, _ = e.LeaseNetworks(ctx)
				if j%5 == 0 {
					_ = e.Down(ctx, lease, dockerio.DownOptions{})
				}
			}
		}()
	}
	wg.Wait()
}

// Another installation's objects of the same lease UUID are never listed,
// attributed, reused or removed, as with the real engine.
func TestForeignObjects_SameLease_RefusedAndLeftAlone(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	theirs := e.AddForeignContainer(lease, "web", 0, "inst-other")
	err := e.Up(ctx, plan)
	if !errors.Is(err, dockerio.ErrForeignObject) || !strings.Contains(err.Error(), theirs) {
		t.Fatalf("Up over a foreign container = %v, want ErrForeignObject naming it", err)
	}
	if cs, _ := e.Cohort(ctx, lease); len(cs) != 0 {
		t.Errorf("Cohort attributes %d containers", len(cs))
	}
	if list, _ := e.ListManaged(ctx); len(list) != 0 {
		t.Errorf("ListManaged lists %d", len(list))
	}
	if err := e.Down(ctx, lease, dockerio.DownOptions{RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveContainers(ctx, []string{theirs}); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("RemoveContainers(foreign) = %v", err)
	}
	if err := e.StopRemove(ctx, theirs, time.Second); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("StopRemove(foreign) = %v", err)
	}
	if _, _, err := e.Logs(ctx, theirs, 10, 100); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("Logs(foreign) = %v", err)
	}
	if c, err := e.Inspect(ctx, theirs); err != nil || c.State != "running" {
		t.Fatalf("foreign container after all that: %+v, %v", c, err)
	}
	if err := e.Kill(theirs, 0); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	delete(e.containers, theirs) // its installation removed it
	e.mu.Unlock()

	other := "99999999-2222-3333-4444-555555555555"
	net := e.AddForeignLeaseNetwork(other, "inst-other")
	if _, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: other, BackendName: "docker"}); !errors.Is(err, dockerio.ErrForeignNetwork) || !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("EnsureNetwork over a foreign lease network = %v", err)
	}
	if err := e.RemoveNetwork(ctx, net); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("RemoveNetwork(foreign) = %v", err)
	}
	for _, n := range mustNetworks(t, e) {
		if n.ID == net {
			t.Errorf("LeaseNetworks lists the foreign network")
		}
	}
	if _, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: other, InstallationID: "inst-other"}); err == nil {
		t.Errorf("EnsureNetwork for another installation accepted")
	}
	bad := plan
	bad.InstallationID = "inst-other"
	if err := e.Up(ctx, bad); err == nil {
		t.Errorf("Up of another installation's plan accepted")
	}
}

func mustNetworks(t *testing.T, e *Engine) []dockerio.Network {
	t.Helper()
	nets, err := e.LeaseNetworks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return nets
}

func TestStopRemove_GracefulExitZeroDieEvent_AbsentIsSuccess(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	cs, _ := e.Cohort(ctx, lease)
	events, _ := e.Events(ctx)
	if err := e.StopRemove(ctx, cs[0].ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if kill, die := <-events, <-events; kill.Action != "kill" || die.Action != "die" || die.ExitCode != 0 || die.ContainerID != cs[0].ID {
		t.Errorf("StopRemove events = %+v, %+v; want kill, die exit 0", kill, die)
	}
	if _, err := e.Inspect(ctx, cs[0].ID); !errdefs.IsNotFound(err) {
		t.Errorf("after StopRemove: %v", err)
	}
	if err := e.StopRemove(ctx, cs[0].ID, time.Second); err != nil || e.Calls(OpStopRemove) != 2 {
		t.Errorf("StopRemove(absent) = %v, calls %d", err, e.Calls(OpStopRemove))
	}
}

func TestUp_TenantTmpfsOverImageVolume_RefusedLikeTheRealEngine(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	plan.Services[1].Tmpfs = []string{"/data/cache"}
	if err := e.Up(ctxT(t), plan); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("Up with tmpfs inside an image VOLUME = %v, want ErrImageNotAdmissible", err)
	}
}

// Like the real engine: a stateful service with image VOLUMEs needs one volume
// directory per instance; a diskless one takes none.
func TestUp_StatefulWithoutVolumeDirs_RefusedLikeTheRealEngine(t *testing.T) {
	e := New(Options{InstallationID: installation})
	plan := stack(t, e)
	ctx := ctxT(t)
	for name, mutate := range map[string]func(*dockerio.ServicePlan){
		"none":       func(s *dockerio.ServicePlan) { s.VolumeDirs = nil },
		"too few":    func(s *dockerio.ServicePlan) { s.Quantity = 2 },
		"relative":   func(s *dockerio.ServicePlan) { s.VolumeDirs = []string{"volumes/x"} },
		"diskless+1": func(s *dockerio.ServicePlan) { s.DiskMB = 0 },
	} {
		p := plan
		p.Services = slices.Clone(plan.Services)
		mutate(&p.Services[0])
		if err := e.Up(ctx, p); err == nil || !strings.Contains(err.Error(), "volume director") {
			t.Errorf("%s: Up = %v, want a volume directory refusal", name, err)
		}
		if cs, _ := e.Cohort(ctx, lease); len(cs) != 0 {
			t.Fatalf("%s: the refused Up created %d containers", name, len(cs))
		}
	}
	if err := e.Up(ctx, plan); err != nil {
		t.Fatalf("Up with a volume directory per instance: %v", err)
	}
}

func TestAddImage_NumericUserFillsUIDGID_NamedUserTakesThemAsGiven(t *testing.T) {
	e := New(Options{InstallationID: installation})
	ctx := ctxT(t)
	for ref, c := range map[string]struct {
		info     dockerio.ImageInfo
		uid, gid int
	}{
		"127.0.0.1:5000/u/root:1":    {dockerio.ImageInfo{}, 0, 0},
		"127.0.0.1:5000/u/numeric:1": {dockerio.ImageInfo{User: "1000:1001"}, 1000, 1001},
		"127.0.0.1:5000/u/uidonly:1": {dockerio.ImageInfo{User: "1000"}, 1000, 0},
		"127.0.0.1:5000/u/named:1":   {dockerio.ImageInfo{User: "app", UID: 1000, GID: 1000}, 1000, 1000},
	} {
		e.AddImage(ref, c.info)
		got, err := e.ResolveImage(ctx, ref)
		if err != nil || got.UID != c.uid || got.GID != c.gid {
			t.Errorf("%s: ResolveImage = %d:%d, %v; want %d:%d", ref, got.UID, got.GID, err, c.uid, c.gid)
		}
		if pinned, err := e.PinnedImage(ctx, got.Pin(ref)); err != nil || pinned.UID != c.uid || pinned.GID != c.gid {
			t.Errorf("%s: PinnedImage = %d:%d, %v", ref, pinned.UID, pinned.GID, err)
		}
	}
}

// Detection answers the configured paths as the real engine would keep them;
// seeding checks and records requests; both fail on demand.
func TestWritablePaths_ConfiguredDetectionSeedingAndSeccomp(t *testing.T) {
	e := New(Options{InstallationID: installation})
	ctx := ctxT(t)
	info, err := e.ResolveImage(ctx, e.AddImage("nginx", dockerio.ImageInfo{User: "www-data", UID: 33, GID: 33, Volumes: []string{"/data"}}).Digest)
	if err != nil {
		t.Fatal(err)
	}
	e.SetWritablePaths(info.ID, []string{"/var/lib/nginx", "/data/x", "/var/log/nginx", "/a", "/b", "/c", "/cache"}, nil, nil)
	w, err := e.DetectWritablePaths(ctx, dockerio.WritableQuery{Service: manifest.Service{Tmpfs: []string{"/cache"}}, ImageID: info.ID})
	if err != nil || !slices.Equal(w.Paths, []string{"/var/lib/nginx", "/var/log/nginx", "/a", "/b"}) || !slices.Equal(w.Dropped, []string{"/c"}) ||
		len(w.Refused) != 2 || w.UID != 33 || w.GID != 33 {
		t.Errorf("DetectWritablePaths = %+v, %v", w, err)
	}
	req := dockerio.SeedRequest{ImageID: info.ID, Paths: w.Paths, Dirs: []string{"/v/0"}, UID: 33, GID: 33, MaxEntries: 10, MaxBytes: 10}
	if err := e.SeedWritablePaths(ctx, req); err != nil || len(e.Seeded()) != 1 || e.Seeded()[0].Dirs[0] != "/v/0" {
		t.Errorf("SeedWritablePaths = %v, seeded %+v", err, e.Seeded())
	}
	bad := req
	bad.Paths = []string{"/run/x"}
	if err := e.SeedWritablePaths(ctx, bad); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("seeding under /run: %v", err)
	}
	boom := errors.New("boom")
	e.SetWritablePaths(info.ID, nil, boom, boom)
	if _, err := e.DetectWritablePaths(ctx, dockerio.WritableQuery{ImageID: info.ID}); !errors.Is(err, boom) {
		t.Errorf("detection failing on demand: %v", err)
	}
	if err := e.SeedWritablePaths(ctx, req); !errors.Is(err, boom) || len(e.Seeded()) != 1 {
		t.Errorf("seeding failing on demand: %v", err)
	}
	if on, err := e.SeccompEnabled(ctx); !on || err != nil {
		t.Errorf("SeccompEnabled = %v, %v", on, err)
	}
	e.SetSeccompEnabled(false)
	if on, _ := e.SeccompEnabled(ctx); on || e.Calls(OpSeccompEnabled) != 2 || e.Calls(OpDetectWritable) != 2 || e.Calls(OpSeedWritable) != 3 {
		t.Errorf("SeccompEnabled after disabling: %v; calls %d %d %d", on, e.Calls(OpSeccompEnabled), e.Calls(OpDetectWritable), e.Calls(OpSeedWritable))
	}
}
