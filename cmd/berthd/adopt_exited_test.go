package main

import (
	"context"
	"net/http"
	"testing"
	"time"

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
	berth.deprovisionUntilGone(l)
}
