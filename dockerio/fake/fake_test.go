package fake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
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
		return dockerio.ServicePlan{Name: name, SKU: "s", Quantity: q, CPUCores: 1, MemoryMB: 64, Image: image, ImageID: info.ID,
			ImageVolumes: info.Volumes, Ports: []dockerio.PortSpec{{Port: 8080, Protocol: "tcp"}}}
	}
	db := svc("db", 1)
	db.DiskMB = 10
	db.HealthCheck = &dockerio.HealthCheck{Test: []string{"CMD", "probe"}}
	web := svc("web", 2)
	web.DependsOn = map[string]string{"db": "service_healthy"}
	return dockerio.Plan{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation, OperationID: "op1",
		Generation: 1, NetworkID: id, HostBindIP: "127.0.0.1", ReadonlyRootfs: true, Services: []dockerio.ServicePlan{db, web}}
}

func TestImages_MissingIsErrImagePull_AddedIsPullableAndInspectable(t *testing.T) {
	e := New(Options{})
	ctx := ctxT(t)
	if err := e.PullImage(ctx, image); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PullImage(missing) = %v", err)
	}
	if _, err := e.InspectImage(ctx, image); !errors.Is(err, dockerio.ErrNotFound) {
		t.Errorf("InspectImage(missing) = %v", err)
	}
	added := e.AddImage(image, dockerio.ImageInfo{Volumes: []string{"/a"}, User: "app"})
	if err := e.PullImage(ctx, image); err != nil {
		t.Errorf("PullImage = %v", err)
	}
	got, err := e.InspectImage(ctx, image)
	if err != nil || got.ID != added.ID || !strings.HasPrefix(got.ID, "sha256:") || got.User != "app" {
		t.Errorf("InspectImage = %+v, %v", got, err)
	}
	if byID, err := e.InspectImage(ctx, added.ID); err != nil || byID.ID != added.ID {
		t.Errorf("InspectImage(by ID) = %+v, %v", byID, err)
	}
	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf("/v%d", i)
	}
	e.AddImage("many", dockerio.ImageInfo{Volumes: many})
	if _, err := e.InspectImage(ctx, "many"); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("InspectImage(17 volumes) = %v", err)
	}
}

func TestEnsureNetwork_IdempotentOwnedAndForeignRefused(t *testing.T) {
	e := New(Options{})
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
	nets, _ := e.LeaseNetworks(ctx, installation)
	if len(nets) != 1 || nets[0].ID != a {
		t.Errorf("LeaseNetworks = %+v", nets)
	}
	if err := e.RemoveNetwork(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveNetwork(ctx, a); err != nil {
		t.Errorf("RemoveNetwork again = %v", err)
	}
	if _, err := e.InspectNetwork(ctx, a); !errors.Is(err, dockerio.ErrNotFound) {
		t.Errorf("InspectNetwork(removed) = %v", err)
	}
}

func TestUp_CohortAttributedLabelledStartingThenHealthy_StartEvents(t *testing.T) {
	e := New(Options{HealthyAfter: 50 * time.Millisecond})
	plan := stack(t, e)
	ctx := ctxT(t)
	events, _ := e.Events(ctx, installation)
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
	if len(e.Volumes()) != 1 {
		t.Errorf("stateful db should own one named volume: %v", e.Volumes())
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
	e := New(Options{})
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
	if err := e.Up(ctx, plan); !errors.Is(err, dockerio.ErrNotFound) {
		t.Errorf("Up on a removed network = %v", err)
	}
}

func TestKillAndDown_EmitDieEvents_DownKeepsNetwork(t *testing.T) {
	e := New(Options{})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	events, errc := e.Events(ctx, installation)
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
	if len(e.Volumes()) != 0 {
		t.Errorf("RemoveVolumes left %v", e.Volumes())
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
	e := New(Options{})
	plan := stack(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	mine, mineErr := e.Events(ctx, installation)
	theirs, theirsErr := e.Events(context.Background(), "inst-other")
	if err := e.Up(ctxT(t), plan); err != nil {
		t.Fatal(err)
	}
	if ev := <-mine; ev.Action != "start" {
		t.Errorf("first event = %+v", ev)
	}
	select {
	case ev := <-theirs:
		t.Errorf("other installation got %+v", ev)
	default:
	}
	cancel()
	if err := <-mineErr; !errors.Is(err, context.Canceled) {
		t.Errorf("stream end = %v, want context.Canceled", err)
	}
	for range mine {
	}
	e.BreakEvents(errors.New("connection reset"))
	if err := <-theirsErr; err == nil || err.Error() != "connection reset" {
		t.Errorf("broken stream end = %v", err)
	}
	for range theirs {
	}
}

func TestDelayAndUnavailable(t *testing.T) {
	e := New(Options{})
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
	_, errc := e.Events(ctxT(t), installation)
	if err := <-errc; !errors.Is(err, dockerio.ErrUnavailable) {
		t.Errorf("Events while unavailable = %v", err)
	}
	e.SetUnavailable(false)
	if err := e.Ping(ctxT(t)); err != nil || e.Calls(OpPing) != 3 {
		t.Errorf("Ping = %v, calls %d", err, e.Calls(OpPing))
	}
}

func TestLogs_TailAndByteCap(t *testing.T) {
	e := New(Options{})
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
	if _, _, err := e.Logs(ctx, "nope", 1, 1); !errors.Is(err, dockerio.ErrNotFound) {
		t.Errorf("Logs(unknown) = %v", err)
	}
}

func TestListManaged_OnlyInstallation_ListView(t *testing.T) {
	e := New(Options{})
	plan := stack(t, e)
	ctx := ctxT(t)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	cs, _ := e.Cohort(ctx, lease)
	_ = e.Kill(cs[0].ID, 1)
	list, err := e.ListManaged(ctx, installation)
	if err != nil || len(list) != 3 {
		t.Fatalf("ListManaged = %d, %v", len(list), err)
	}
	if list[0].State != "exited" || list[0].Health != "" || !list[0].FinishedAt.IsZero() {
		t.Errorf("list view of an exited container = %+v", list[0])
	}
	if other, _ := e.ListManaged(ctx, "inst-other"); len(other) != 0 {
		t.Errorf("other installation sees %d", len(other))
	}
}

// Hammer the fake from many goroutines; -race proves it is safe.
func TestConcurrentUse_RaceFree(t *testing.T) {
	e := New(Options{HealthyAfter: time.Millisecond})
	plan := stack(t, e)
	ctx := ctxT(t)
	events, _ := e.Events(ctx, installation)
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
				_, _ = e.ListManaged(ctx, installation)
				_, _ = e.LeaseNetworks(ctx, installation)
				if j%5 == 0 {
					_ = e.Down(ctx, lease, dockerio.DownOptions{})
				}
			}
		}()
	}
	wg.Wait()
}
