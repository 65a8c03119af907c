package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/fake"
)

// TestConformance_FakeBehavesLikeTheRealEngine drives the same scenario through
// the real engine and through dockerio/fake and requires identical transcripts,
// so actor tests written against the fake see what production will see.
func TestConformance_FakeBehavesLikeTheRealEngine(t *testing.T) {
	requireDocker(t)
	real := newTestEngine(t)
	realInfo := ensurePulled(t, real)

	f := fake.New(fake.Options{})
	fakeInfo := f.AddImage(fx.image, dockerio.ImageInfo{Volumes: realInfo.Volumes, User: realInfo.User})

	realT := conformanceScenario(t, real, realInfo, func(name string) string { return createForeignNetwork(t, name) })
	fakeT := conformanceScenario(t, f, fakeInfo, f.AddForeignNetwork)
	if !slices.Equal(realT, fakeT) {
		for i := range max(len(realT), len(fakeT)) {
			r, k := at(realT, i), at(fakeT, i)
			mark := "  "
			if r != k {
				mark = "≠ "
			}
			t.Logf("%sreal: %-60s fake: %s", mark, r, k)
		}
		t.Fatal("the fake's transcript differs from the real engine's")
	}
	t.Logf("%d identical observations:\n%s", len(realT), strings.Join(realT, "\n"))
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

func conformanceScenario(t *testing.T, e dockerio.Engine, info dockerio.ImageInfo, foreign func(name string) string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out []string
	note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	kind := func(err error) string {
		for _, s := range []error{dockerio.ErrNotFound, dockerio.ErrImagePull, dockerio.ErrForeignNetwork, dockerio.ErrUnavailable, dockerio.ErrAddressPoolExhausted} {
			if errors.Is(err, s) {
				return s.Error()
			}
		}
		if err != nil {
			return "other error"
		}
		return "ok"
	}
	installation := "inst-conf-" + uuid.NewString()[:8]
	lease := uuid.NewString()
	spec := dockerio.NetworkSpec{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation}
	defer func() { // real engine: leave nothing behind even when the scenario fails half-way
		_ = e.Down(context.Background(), lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true})
		if nets, err := e.LeaseNetworks(context.Background(), installation); err == nil {
			for _, n := range nets {
				_ = e.RemoveNetwork(context.Background(), n.ID)
			}
		}
	}()

	note("pull missing: %s", kind(e.PullImage(ctx, testRepo+":absent-"+uuid.NewString()[:8])))
	_, err := e.InspectImage(ctx, testRepo+":absent")
	note("inspect missing image: %s", kind(err))
	netID, err := e.EnsureNetwork(ctx, spec)
	again, err2 := e.EnsureNetwork(ctx, spec)
	note("ensure network twice: %s %s same=%v", kind(err), kind(err2), netID == again)
	other := spec
	other.Lease = uuid.NewString()
	foreign(dockerio.ProjectName(other.Lease))
	_, err = e.EnsureNetwork(ctx, other)
	note("ensure over foreign: %s", kind(err))
	_, err = e.InspectNetwork(ctx, strings.Repeat("0", 64))
	note("inspect unknown network: %s", kind(err))

	svc := func(name string, q int) dockerio.ServicePlan {
		return dockerio.ServicePlan{Name: name, SKU: "s", Quantity: q, CPUCores: 0.5, MemoryMB: 64, Image: fx.image,
			ImageID: info.ID, ImageVolumes: info.Volumes, Ports: []dockerio.PortSpec{{Port: 8080, Protocol: "tcp"}}}
	}
	db := svc("db", 1)
	db.DiskMB = 10
	web := svc("web", 2)
	web.DependsOn = map[string]string{"db": "service_started"}
	plan := dockerio.Plan{Lease: lease, Tenant: "t", ProviderUUID: "p", BackendName: "docker", InstallationID: installation,
		OperationID: "op-1", Generation: 1, NetworkID: netID, HostBindIP: "127.0.0.1", ReadonlyRootfs: true,
		PidsLimit: 64, TmpfsSizeMB: 8, Services: []dockerio.ServicePlan{db, web}}
	note("up: %s", kind(e.Up(ctx, plan)))

	cohort, err := e.Cohort(ctx, lease)
	note("cohort: %s %d", kind(err), len(cohort))
	for _, c := range cohort {
		var keys []string
		for k := range c.Labels {
			if strings.HasPrefix(k, "fred.") || k == "com.docker.compose.project" || k == "com.docker.compose.service" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		b := c.Ports["8080/tcp"]
		note("  %s/%d %s gen=%d op=%s image=%v port-on=%s has-port=%v labels=%s", c.Service, c.Index, c.State, c.Generation,
			c.OperationID, c.ImageID == info.ID, b.HostIP, b.HostPort != "", strings.Join(keys, ","))
		note("  compose service label %s", c.Labels["com.docker.compose.service"])
	}
	list, err := e.ListManaged(ctx, installation)
	none, err2 := e.ListManaged(ctx, "inst-nobody-"+uuid.NewString()[:8])
	note("list managed: %s %d; other installation: %s %d", kind(err), len(list), kind(err2), len(none))
	nets, err := e.LeaseNetworks(ctx, installation)
	note("lease networks: %s %d", kind(err), len(nets))
	_, err = e.Inspect(ctx, strings.Repeat("f", 64))
	note("inspect unknown container: %s", kind(err))
	_, _, err = e.Logs(ctx, strings.Repeat("f", 64), 10, 100)
	note("logs unknown container: %s", kind(err))

	if len(cohort) == 3 {
		evCtx, stop := context.WithCancel(ctx)
		events, _ := e.Events(evCtx, installation)
		time.Sleep(200 * time.Millisecond) // let the real stream subscribe before acting
		note("remove web/1 + unknown: %s", kind(e.RemoveContainers(ctx, []string{cohort[2].ID, strings.Repeat("e", 64)})))
		var got []string
		timeout := time.After(30 * time.Second)
		for len(got) < 2 {
			select {
			case ev := <-events:
				if ev.ContainerID == cohort[2].ID {
					got = append(got, fmt.Sprintf("%s(%s/%d exit %d)", ev.Action, ev.Service, ev.Index, ev.ExitCode))
				}
			case <-timeout:
				got = append(got, "timeout")
			}
		}
		stop()
		note("events of the removal: %s", strings.Join(got, " "))
		after, _ := e.Cohort(ctx, lease)
		note("cohort after removal: %d", len(after))
	}
	note("remove network in use: %s", kind(e.RemoveNetwork(ctx, netID)))
	note("down: %s", kind(e.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true})))
	cohort, err = e.Cohort(ctx, lease)
	note("cohort after down: %s %d", kind(err), len(cohort))
	n, err := e.InspectNetwork(ctx, netID)
	note("network after down: %s containers=%d", kind(err), n.Containers)
	note("down again: %s", kind(e.Down(ctx, lease, dockerio.DownOptions{})))
	note("remove network: %s", kind(e.RemoveNetwork(ctx, netID)))
	note("remove network again: %s", kind(e.RemoveNetwork(ctx, netID)))
	_, err = e.InspectNetwork(ctx, netID)
	note("inspect removed network: %s", kind(err))
	note("up on removed network: %s", kind(e.Up(ctx, plan)))
	return out
}
