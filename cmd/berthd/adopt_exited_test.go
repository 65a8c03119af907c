package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// A lease whose container exited while fred was stopped: fred's own restart
// calls it failed (fail_count +1, ContainerExited, its container kept, /info
// refused); the adopted lease says the same.
func TestFredV013Host_AnExitedCohortIsAdoptedFailedAsFredsRestartSaysIt(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	fred := startFred(t)
	l := fred.provisionAs([]messages.LeaseItem{{SKU: "docker-micro", Quantity: 1}}, flatManifest(nil), cb.callbackURL())
	fred.waitFor(l, "/provisions/", `"status":"ready"`)
	fred.stop()
	dc := dockerClient(t)
	if err := dc.ContainerKill(context.Background(), leaseContainers(t, dc, l)[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); leaseContainers(t, dc, l)[0].State == "running"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed container still runs")
		}
	}
	fred.start()
	fred.waitFor(l, "/provisions/", `"status":"failed"`)
	fredSaid := map[string]string{}
	fredCode := map[string]int{}
	for _, p := range []string{"/provisions/", "/info/", "/releases/"} {
		fredCode[p], fredSaid[p] = fred.signed(http.MethodGet, p+l, nil)
	}
	fred.stop()

	berth := fred.adoptInto([]string{"adopted 1 leases"}, "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}")
	berth.startInProcess()
	berth.waitStatus(l, messages.StatusFailed, 30*time.Second)
	for _, p := range []string{"/provisions/", "/releases/"} {
		sameAnswer(t, p+l, []byte(fredSaid[p]), berth.get(p+l).Body, normalizeAnswer)
	}
	if r := berth.get("/info/" + l); r.Status != fredCode["/info/"] {
		t.Fatalf("/info of the failed lease: berthd %d %s, fred %d %s", r.Status, r.Body, fredCode["/info/"], fredSaid["/info/"])
	}
	// What a fred started by mistake would create under the same name is fred's,
	// not adopted: counted as such, never touched. The adopted (exited) one is not.
	labels := leaseContainers(t, dc, l)[0].Labels
	stray := map[string]string{}
	for k, v := range labels {
		stray[k] = v
	}
	stray["fred.lease_uuid"] = uuid.NewString()
	resp, err := dc.ContainerCreate(context.Background(), &container.Config{Image: testImage(), Labels: stray}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m := string(berth.get("/metrics").Body)
		if strings.Contains(m, `berth_unaccounted_containers{kind="fred_v013"} 1`+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stray fred container beside the adopted one, not counted:\n%s", grepLines(m, "berth_unaccounted_containers"))
		}
	}
	if _, err := dc.ContainerInspect(context.Background(), resp.ID); err != nil {
		t.Fatalf("the stray fred container was touched: %v", err)
	}
	berth.deprovisionUntilGone(l)
}
