package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// installationObjects is what one installation holds of a lease, read with the
// raw client and the file system: container ID → state, network IDs, and its
// managed volumes (name@inode under the daemon's own volume root, so a volume
// destroyed and recreated under the same name shows).
type installationObjects struct {
	containers map[string]string
	networks   []string
	volumes    []string
}

func (o installationObjects) String() string {
	return fmt.Sprintf("containers %v, networks %v, volumes %v", o.containers, o.networks, o.volumes)
}

func objectsOf(t *testing.T, dc *client.Client, d *daemonProc, lease, installation string) installationObjects {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "fred.lease_uuid="+lease), filters.Arg("label", "fred.installation_id="+installation))
	o := installationObjects{containers: map[string]string{}}
	cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		o.containers[c.ID] = c.State
	}
	ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		o.networks = append(o.networks, n.ID)
	}
	// A lease on a warm pool network: that network carries no lease label, so
	// it is found through the containers attached to it.
	for id := range o.containers {
		c, err := dc.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range c.NetworkSettings.Networks {
			if !slices.Contains(o.networks, ep.NetworkID) {
				o.networks = append(o.networks, ep.NetworkID)
			}
		}
	}
	root := filepath.Join(d.dir, "volumes") // testConfig's volume_data_path
	entries, err := os.ReadDir(root)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.Contains(e.Name(), lease) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(root, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		o.volumes = append(o.volumes, fmt.Sprintf("%s@%d", e.Name(), st.Ino))
	}
	slices.Sort(o.networks)
	slices.Sort(o.volumes)
	return o
}

func sameObjects(a, b installationObjects) bool {
	if len(a.containers) != len(b.containers) {
		return false
	}
	for id, st := range a.containers {
		if b.containers[id] != st {
			return false
		}
	}
	return slices.Equal(a.networks, b.networks) && slices.Equal(a.volumes, b.volumes)
}

// Two berthd daemons (two data dirs, so two installation IDs) on one Docker
// engine, the same lease UUID provisioned in both, on a stateful SKU so a volume
// exists: the first reaches ready; the second's provision fails cleanly (a failed
// callback) without touching the first's container, network or volume; a
// re-provision and a close on the second leave the first's container running
// under the same ID, its network and its volume intact; closing the first then
// works normally.
func TestTwoInstallations_SameLease_NeitherTouchesTheOthersObjects(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	skus := "sku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}}"
	cbA, cbB := newCallbackReceiver(t), newCallbackReceiver(t)
	a := newDaemonDir(t, skus).startInProcess()
	b := newDaemonDir(t, skus).startInProcess()
	instA := benchInstallationID(t, filepath.Join(a.dir, "data"))
	instB := benchInstallationID(t, filepath.Join(b.dir, "data"))
	if instA == instB {
		t.Fatalf("both daemons have installation %s", instA)
	}
	lease := uuid.NewString()
	item := messages.LeaseItem{SKU: "stateful", Quantity: 1}

	if r := a.provision(lease, cbA.callbackURL(), flatManifest(nil), item); r.Status != 202 {
		t.Fatalf("A provision: %d %s", r.Status, r.Body)
	}
	if got := cbA.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("A provision callback = %+v", got[0].Body)
	}
	before := objectsOf(t, dc, a, lease, instA)
	if len(before.containers) != 1 || len(before.networks) != 1 || len(before.volumes) != 1 {
		t.Fatalf("A's lease: %s; want 1 container, 1 network, 1 volume", before)
	}
	for id, st := range before.containers {
		if st != "running" {
			t.Fatalf("A's container %s is %s", id[:12], st)
		}
	}
	var li0 messages.LeaseInfo
	a.get("/info/"+lease).json(t, &li0)
	if len(li0.Instances) != 1 {
		t.Fatalf("A's instances %+v", li0.Instances)
	}
	aPort := li0.Instances[0].Ports["8080/tcp"].HostPort
	if code, body := putFile(t, aPort, "/data/owned.txt", []byte("A's data")); code >= 300 {
		t.Fatalf("write A's data: %d %s", code, body)
	}
	intact := func(step string) {
		t.Helper()
		if now := objectsOf(t, dc, a, lease, instA); !sameObjects(before, now) {
			t.Fatalf("after %s, A's lease changed:\nbefore %s\nnow    %s\nB's log:\n%s", step, before, now, b.log.String())
		}
	}

	// B provisions the same lease UUID: it fails, cleanly, and touches nothing of A's.
	failedOnB := func(step string, n int) {
		t.Helper()
		if r := b.provision(lease, cbB.callbackURL(), flatManifest(nil), item); r.Status != 202 {
			t.Fatalf("B %s: %d %s", step, r.Status, r.Body)
		}
		got := cbB.waitFor(lease, n, 2*time.Minute)
		if cb := got[n-1].Body; cb.Status != messages.CallbackFailed {
			t.Fatalf("B %s callback = %+v, want failed", step, cb)
		} else {
			t.Logf("B %s failed: %q", step, cb.Error)
		}
		b.waitStatus(lease, "failed", 30*time.Second)
		intact("B's " + step)
		// B's own volume (in B's root) may stay with its failed lease, as Fred
		// keeps a failed lease's data for a re-provision; its containers may not.
		if mine := objectsOf(t, dc, b, lease, instB); len(mine.containers) != 0 {
			t.Fatalf("B's failed %s left %s", step, mine)
		}
	}
	failedOnB("provision", 1)
	failedOnB("re-provision", 2)

	// A's reconciler and B's reconciler (3 s) both pass over the lease meanwhile.
	time.Sleep(4 * time.Second)
	intact("a reconcile interval")

	// B closes its lease: nothing of A's goes.
	b.deprovisionUntilGone(lease)
	if got := cbB.waitFor(lease, 3, time.Minute); got[2].Body.Status != messages.CallbackDeprovisioned {
		t.Fatalf("B close callback = %+v", got[2].Body)
	}
	time.Sleep(4 * time.Second) // B's reclaimer and reconciler get their chance
	intact("B's close")
	if mine := objectsOf(t, dc, b, lease, instB); len(mine.containers)+len(mine.networks)+len(mine.volumes) != 0 {
		t.Fatalf("B's closed lease left %s", mine)
	}
	assertPoolEmpty(t, b)

	// A's lease still serves, from the same container.
	if info := a.provisionInfo(lease); info.Status != "ready" {
		t.Fatalf("A's lease = %+v, want ready", info)
	}
	var li messages.LeaseInfo
	a.get("/info/"+lease).json(t, &li)
	if len(li.Instances) != 1 || !hasPrefixKey(before.containers, li.Instances[0].ContainerID) {
		t.Fatalf("A's instances %+v, want its container %v", li.Instances, before.containers)
	}
	if code, body, err := httpGetHostPort("127.0.0.1:"+li.Instances[0].Ports["8080/tcp"].HostPort, "/file?path=/data/owned.txt"); err != nil || code != 200 || body != "A's data" {
		t.Fatalf("A's data through its published port: %d %q %v", code, body, err)
	}

	// Closing A works normally: everything of the lease goes.
	a.deprovisionUntilGone(lease)
	if got := cbA.waitFor(lease, 2, time.Minute); got[1].Body.Status != messages.CallbackDeprovisioned {
		t.Fatalf("A close callback = %+v", got[1].Body)
	}
	assertGone(t, dc, lease)
	assertPoolEmpty(t, a)
	if n := cbA.badSignatures() + cbB.badSignatures(); n != 0 {
		t.Fatalf("%d callbacks with bad signatures", n)
	}
}

// hasPrefixKey reports whether a key of m starts with the (short) ID.
func hasPrefixKey(m map[string]string, short string) bool {
	for k := range m {
		if short != "" && strings.HasPrefix(k, short) {
			return true
		}
	}
	return false
}
