package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

func testSpec(installation string) dockerio.NetworkSpec {
	lease := uuid.NewString()
	return dockerio.NetworkSpec{Lease: lease, Tenant: "tenant-" + lease[:8], BackendName: "docker", InstallationID: installation}
}

// removeNetworkAtEnd removes whatever network of that name the test leaves behind.
func removeNetworksNamedAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range networksNamed(t, ctx, name) {
			_ = fx.docker.NetworkRemove(ctx, n.ID)
		}
	})
}

func networksNamed(t *testing.T, ctx context.Context, name string) []network.Summary {
	t.Helper()
	list, err := fx.docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		t.Fatalf("network list: %v", err)
	}
	var exact []network.Summary
	for _, n := range list {
		if n.Name == name {
			exact = append(exact, n)
		}
	}
	return exact
}

func TestEnsureNetwork_CreatesVerifiedLabelledBridge_IdempotentListedAndRemovable(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, time.Minute)
	spec := testSpec(e.opts.InstallationID)
	name := dockerio.ProjectName(spec.Lease)
	removeNetworksNamedAtEnd(t, name)

	id, err := e.EnsureNetwork(ctx, spec)
	if err != nil {
		t.Fatalf("EnsureNetwork: %v", err)
	}
	raw, err := fx.docker.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if raw.ID != id || raw.Name != name || raw.Driver != "bridge" || raw.Internal {
		t.Errorf("network = id %s name %s driver %s internal %v", raw.ID, raw.Name, raw.Driver, raw.Internal)
	}
	if !labels.HasAll(raw.Labels, labels.Network(spec)) {
		t.Errorf("labels = %v, want %v", raw.Labels, labels.Network(spec))
	}
	for k := range raw.Labels {
		if len(k) > 19 && k[:19] == "com.docker.compose." {
			t.Errorf("lease network carries compose label %s: compose could claim it", k)
		}
	}

	again, err := e.EnsureNetwork(ctx, spec)
	if err != nil || again != id {
		t.Errorf("second EnsureNetwork = %s, %v; want %s", again, err, id)
	}
	if n := len(networksNamed(t, ctx, name)); n != 1 {
		t.Errorf("%d networks named %s, want 1", n, name)
	}

	got, err := e.InspectNetwork(ctx, id)
	if err != nil || got.ID != id || got.Name != name || got.Containers != 0 {
		t.Errorf("InspectNetwork = %+v, %v", got, err)
	}
	if _, err := e.InspectNetwork(ctx, name); !cerrdefs.IsNotFound(err) {
		t.Errorf("InspectNetwork(by name) = %v, want ErrNotFound (IDs only)", err)
	}
	listed, err := e.LeaseNetworks(ctx)
	if err != nil || len(listed) != 1 || listed[0].ID != id {
		t.Errorf("LeaseNetworks = %+v, %v; want just %s", listed, err, id)
	}
	other := newTestEngine(t)
	if theirs, err := other.LeaseNetworks(ctx); err != nil || len(theirs) != 0 {
		t.Errorf("LeaseNetworks of another installation = %+v, %v; want none", theirs, err)
	}
	if err := other.RemoveNetwork(ctx, id); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("RemoveNetwork by another installation = %v, want ErrForeignObject", err)
	}
	if _, err := e.InspectNetwork(ctx, id); err != nil {
		t.Errorf("network after another installation's RemoveNetwork: %v", err)
	}
	bad := spec
	bad.InstallationID = "inst-someone-else"
	if _, err := e.EnsureNetwork(ctx, bad); err == nil || !strings.Contains(err.Error(), "on the engine of installation") {
		t.Errorf("EnsureNetwork for another installation = %v, want refused", err)
	}

	if err := e.RemoveNetwork(ctx, id); err != nil {
		t.Fatalf("RemoveNetwork: %v", err)
	}
	if _, err := e.InspectNetwork(ctx, id); !cerrdefs.IsNotFound(err) {
		t.Errorf("InspectNetwork after remove = %v, want ErrNotFound", err)
	}
	if err := e.RemoveNetwork(ctx, id); err != nil {
		t.Errorf("RemoveNetwork again = %v, want nil (idempotent)", err)
	}
}

func TestEnsureNetwork_SameNamedForeignNetwork_RefusedAndLeftUntouched(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, time.Minute)
	installation := e.opts.InstallationID

	unlabelled := testSpec(installation)
	foreignID := createForeignNetwork(t, dockerio.ProjectName(unlabelled.Lease))
	if _, err := e.EnsureNetwork(ctx, unlabelled); !errors.Is(err, dockerio.ErrForeignNetwork) || !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("EnsureNetwork over an unlabelled network = %v, want ErrForeignNetwork (an ErrForeignObject)", err)
	}
	if err := e.RemoveNetwork(ctx, foreignID); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("RemoveNetwork(unlabelled network) = %v, want ErrForeignObject", err)
	}
	nets := networksNamed(t, ctx, dockerio.ProjectName(unlabelled.Lease))
	if len(nets) != 1 || nets[0].ID != foreignID || len(nets[0].Labels) != 1 {
		t.Errorf("foreign network changed: %+v", nets)
	}

	// Our labels but another installation's identity: still not ours.
	otherInstallation := testSpec(installation)
	theirs := otherInstallation
	theirs.InstallationID = "inst-someone-else"
	name := dockerio.ProjectName(theirs.Lease)
	resp, err := fx.docker.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: labels.Network(theirs)})
	if err != nil {
		t.Fatal(err)
	}
	removeNetworksNamedAtEnd(t, name)
	if _, err := e.EnsureNetwork(ctx, otherInstallation); !errors.Is(err, dockerio.ErrForeignNetwork) {
		t.Errorf("EnsureNetwork over another installation's network = %v, want ErrForeignNetwork", err)
	}
	if n := networksNamed(t, ctx, name); len(n) != 1 || n[0].ID != resp.ID {
		t.Errorf("other installation's network changed: %+v", n)
	}
}

// Docker allows duplicate names (its pre-1.44 duplicate check is best effort).
// Concurrent EnsureNetwork calls for one lease from two engines (which share no
// lock, like two processes: a killed process's create that dockerd still carries
// out, next to its successor's) must leave exactly one network when the calls ask
// for Recheck (every attempt but a lease's first); every caller returns it, or a
// network that no longer exists (caught by Up's by-ID verification). Without
// Recheck (a first attempt, which has no earlier one to race) two may remain, and
// the next call keeps exactly one.
func TestEnsureNetwork_ConcurrentCallsFromTwoEngines_OneNetworkRemains(t *testing.T) {
	installation := newInstallation()
	a, b := newTestEngineFor(t, installation), newTestEngineFor(t, installation)
	ctx := testCtx(t, 3*time.Minute)
	for _, recheck := range []bool{true, false} {
		lost := 0
		for round := 0; round < 4; round++ {
			spec := testSpec(installation)
			spec.Recheck = recheck
			name := dockerio.ProjectName(spec.Lease)
			removeNetworksNamedAtEnd(t, name)

			ids := make([]string, 6)
			errs := make([]error, 6)
			var wg sync.WaitGroup
			for i := range ids {
				e := a
				if i%2 == 1 {
					e = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ids[i], errs[i] = e.EnsureNetwork(ctx, spec)
				}()
			}
			wg.Wait()
			n := len(networksNamed(t, ctx, name))
			switch {
			case recheck && n != 1:
				t.Fatalf("recheck round %d: %d networks named %s, want exactly 1", round, n, name)
			case n > 2:
				t.Fatalf("round %d: %d networks named %s, want at most one per engine", round, n, name)
			}
			survivor, err := a.EnsureNetwork(ctx, spec)
			if err != nil {
				t.Fatalf("round %d: the next call: %v", round, err)
			}
			nets := networksNamed(t, ctx, name)
			if len(nets) != 1 || nets[0].ID != survivor {
				t.Fatalf("round %d: after the next call %d networks named %s, want exactly its %s", round, len(nets), name, survivor[:12])
			}
			for i := range ids {
				if errs[i] != nil {
					t.Errorf("round %d call %d: %v", round, i, errs[i])
					continue
				}
				if ids[i] == survivor {
					continue
				}
				lost++
				if _, err := a.InspectNetwork(ctx, ids[i]); !cerrdefs.IsNotFound(err) {
					t.Errorf("round %d call %d returned %s, neither the survivor nor gone (%v)", round, i, ids[i][:12], err)
				}
			}
		}
		t.Logf("recheck %t: callers that lost a cross-engine race (and got a removed network): %d of 24", recheck, lost)
	}
}

// Two of our networks under one name (left by a race in an earlier process):
// the oldest is kept, the surplus removed.
func TestEnsureNetwork_DuplicateOwnedNetworks_OldestKeptSurplusRemoved(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, time.Minute)
	spec := testSpec(e.opts.InstallationID)
	name := dockerio.ProjectName(spec.Lease)
	removeNetworksNamedAtEnd(t, name)

	oldest := createDuplicateNetwork(t, ctx, name, labels.Network(spec))
	time.Sleep(10 * time.Millisecond) // distinct creation times (ordering, not correctness)
	newer := createDuplicateNetwork(t, ctx, name, labels.Network(spec))
	if n := len(networksNamed(t, ctx, name)); n != 2 {
		t.Fatalf("setup: %d networks named %s, want 2", n, name)
	}
	id, err := e.EnsureNetwork(ctx, spec)
	if err != nil || id != oldest {
		t.Fatalf("EnsureNetwork = %s, %v; want the oldest %s", id, err, oldest)
	}
	nets := networksNamed(t, ctx, name)
	if len(nets) != 1 || nets[0].ID != oldest {
		t.Errorf("after EnsureNetwork: %d networks, newer %s should be gone", len(nets), newer[:12])
	}
}

// createDuplicateNetwork bypasses the SDK, which always asks API < 1.44 daemons
// to refuse duplicate names, to create a same-named network as another process could.
func createDuplicateNetwork(t *testing.T, ctx context.Context, name string, l map[string]string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"Name": name, "Driver": "bridge", "CheckDuplicate": false, "Labels": l})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/v1.41/networks/create", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := fx.docker.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("raw network create: %v", err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ID == "" {
		t.Fatalf("raw network create: status %d, %v", resp.StatusCode, err)
	}
	return out.ID
}
