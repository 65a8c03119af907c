package main

// Against fred v0.13's real docker backend: the preflight of a takeover (issue
// 29, item 2) judges a mixed fred host — a single-container lease, a stack, a
// restarted lease (two releases), a stateful lease with data, a retained
// lease, a failed lease fred knows only by its diagnostics, an undelivered
// callback — naming what it cannot adopt yet (the diagnostics-only lease),
// and changes nothing: not fred's files, not a
// container, not the volume root, not berthd's data dir.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/messages"
)

// signed sends a request to fred signed as providerd signs.
func (f *fredHost) signed(method, path string, v any) (int, string) {
	f.t.Helper()
	var body []byte
	if v != nil {
		body, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest(method, "http://"+f.api+path, bytes.NewReader(body))
	if err := signRequest(req, body); err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// provisionAs asks fred for a lease and returns its UUID once fred took it.
func (f *fredHost) provisionAs(items []messages.LeaseItem, m any, callbackURL string) string {
	f.t.Helper()
	lease := uuid.NewString()
	raw, _ := json.Marshal(m)
	code, answer := f.signed(http.MethodPost, "/provision", messages.ProvisionRequest{LeaseUUID: lease, Tenant: f.tenant(),
		ProviderUUID: "p", Items: items, CallbackURL: callbackURL, Payload: encodeB64(raw)})
	if code != http.StatusAccepted {
		f.t.Fatalf("fred's POST /provision: %d %s\n%s", code, answer, f.log.String())
	}
	return lease
}

// fredState is what must not change: fred's files, its containers' lives, the volume root.
func fredState(t *testing.T, fred *fredHost) string {
	t.Helper()
	var lines []string
	for _, file := range []string{"callbacks.db", "diagnostics.db", "releases.db", "retention.db"} {
		raw, err := os.ReadFile(filepath.Join(fred.dir, file))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %x", file, sha256.Sum256(raw)))
	}
	dc := dockerClient(t)
	cs, err := dc.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "fred.backend_name="+fred.name))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		in, err := dc.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("container %s %s pid %d started %s restarts %d", in.Name, in.State.Status, in.State.Pid, in.State.StartedAt, in.RestartCount))
	}
	_ = filepath.Walk(fred.volumes, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			lines = append(lines, fmt.Sprintf("%s %s %d %s", p, fi.Mode(), fi.Size(), fi.ModTime()))
		}
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestFredV013Host_PreflightJudgesAMixedHostReadyAndChangesNothing(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	fred := startFredWith(t, "retain_on_close: true",
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}\n  docker-small: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 64}")
	micro := func(svc string, n int) messages.LeaseItem {
		return messages.LeaseItem{SKU: "docker-micro", Quantity: n, ServiceName: svc}
	}
	small := []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
	single := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(nil), cb.callbackURL())
	stack := fred.provisionAs([]messages.LeaseItem{micro("web", 2), micro("cache", 1)},
		map[string]any{"services": map[string]any{"web": flatManifest(nil), "cache": flatManifest(nil)}}, cb.callbackURL())
	stateful := fred.provisionAs(small, flatManifest(nil), cb.callbackURL())
	closed := fred.provisionAs(small, flatManifest(nil), cb.callbackURL())
	failed := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(map[string]any{"command": []string{"/no/such/binary"}}), cb.callbackURL())
	undelivered := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(nil),
		"http://127.0.0.1:1/callbacks/provision?operation_id="+uuid.NewString())
	for _, l := range []string{single, stack, stateful, closed, failed} {
		cb.waitFor(l, 1, 3*time.Minute)
	}
	if got := cb.forLease(failed)[0].Body.Status; got != messages.CallbackFailed {
		t.Fatalf("fred's failing provision: %s", got)
	}
	if code, answer := fred.signed(http.MethodPost, "/restart", map[string]string{"lease_uuid": single, "callback_url": cb.callbackURL()}); code != http.StatusAccepted {
		t.Fatalf("fred's POST /restart: %d %s", code, answer)
	}
	fred.waitFor(single, "/releases/", `"version":2,"image":"stack","status":"active"`)
	if code, answer := fred.signed(http.MethodPost, "/deprovision", messages.DeprovisionRequest{LeaseUUID: closed}); code != http.StatusOK {
		t.Fatalf("fred's POST /deprovision: %d %s", code, answer)
	}
	fred.waitFor(closed, "/provisions/", `"status":"retained"`)
	fred.waitFor(undelivered, "/provisions/", `"status":"ready"`)

	mnt := os.Getenv("BERTH_TEST_BTRFS") // fred.volumes lies on it
	berth := newDaemonDir(t, "name: "+fred.name, "listen_addr: "+fred.api, "retain_on_close: true",
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}\n  docker-small: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 64}",
		"volume_data_path: "+fred.volumes, "volume_mount_path: "+mnt, "volume_filesystem: btrfs")
	preflight := func(extra ...string) (int, string) {
		return runOnce(t, append([]string{"-config", berth.cfgPath, "-preflight-storage-identity-adoption", "-v013-dir", fred.dir}, extra...)...)
	}

	// While fred runs: refused, it holds its files and its port.
	if code, out := preflight(); code != 1 || !strings.Contains(out, takeover.FredRunning) || strings.Contains(out, takeover.ReadyLine) {
		t.Fatalf("preflight beside a running fred: exit %d\n%s", code, out)
	}

	fred.stop()
	before := fredState(t, fred)
	code, out := preflight()
	t.Logf("the preflight's report:\n%s", out)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || lines[len(lines)-1] != takeover.ReadyLine {
		t.Fatalf("preflight of a mixed host: exit %d, want 0 ending with %s\n%s\nfred:\n%s", code, takeover.ReadyLine, out, fred.log.String())
	}
	for lease, verdict := range map[string]string{single: "adopt", stack: "adopt", undelivered: "adopt",
		stateful: "adopt", closed: "adopt", failed: "adopt"} {
		if !leaseLine(out, lease, verdict) {
			t.Fatalf("lease %s: want %s\n%s", lease, verdict, out)
		}
	}
	if !strings.Contains(out, failed+"  adopt              "+takeover.DiagnosticsOnly+" fail_count=1") {
		t.Fatalf("want the failed lease fred knows only by its diagnostics adopted as such:\n%s", out)
	}
	if !strings.Contains(out, "web: 2× docker-micro") || !strings.Contains(out, takeover.CallbackImported+": "+undelivered) {
		t.Fatalf("report misses the stack's items or the undelivered callback:\n%s", out)
	}
	if code, out := preflight("-require-drained"); code != 1 || !strings.Contains(out, takeover.CallbacksPending) {
		t.Fatalf("preflight -require-drained with a pending callback: exit %d\n%s", code, out)
	}
	if after := fredState(t, fred); after != before {
		t.Fatalf("the preflight changed fred's host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if entries, _ := os.ReadDir(filepath.Join(berth.dir, "data")); len(entries) > 0 {
		t.Fatalf("the preflight wrote berthd's data dir: %v", entries)
	}

	// The whole mixed host adopted at once, each lease as fred left it.
	lives := containerLives(t, fred.name)
	berth.api = fred.api
	if code, out := runOnce(t, "-config", berth.cfgPath, "-initialize-storage-identity", "adopt", "-v013-dir", fred.dir); code != 0 ||
		!strings.Contains(out, "adopted 4 leases, 1 retained leases' data, 1 leases' failure diagnostics and 1 undelivered callbacks") {
		t.Fatalf("adopt the mixed host: exit %d\n%s", code, out)
	}
	berth.startInProcess()
	for _, l := range []string{single, stack, stateful, undelivered} {
		berth.waitStatus(l, messages.StatusReady, 30*time.Second)
	}
	if rs := berth.retentionList(); len(rs) != 1 || rs[0].LeaseUUID != closed {
		t.Fatalf("GET /retentions: %+v", rs)
	}
	if info := berth.provisionInfo(failed); info.Status != messages.StatusFailed {
		t.Fatalf("the failed lease: %+v", info)
	}
	if rels := berth.get("/releases/" + single); !strings.Contains(string(rels.Body), `"version":2`) {
		t.Fatalf("the restarted lease's releases: %s", rels.Body)
	}
	if after := containerLives(t, fred.name); after != lives {
		t.Fatalf("adopting the mixed host changed fred's containers:\nbefore:\n%s\nafter:\n%s", lives, after)
	}
	for _, l := range []string{single, stack, stateful, undelivered} {
		berth.deprovisionUntilGone(l)
	}
}

// leaseLine: the report's line about lease gives the verdict.
func leaseLine(out, lease, verdict string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "lease" && f[1] == lease {
			return f[2] == verdict
		}
	}
	return false
}

// waitFor waits until fred's answer to GET <path><lease> says what is wanted
// (fred's callbacks carry no delivery ID: the receiver cannot count them).
func (f *fredHost) waitFor(lease, path, want string) {
	f.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		code, answer := f.signed(http.MethodGet, path+lease, nil)
		if code == http.StatusOK && strings.Contains(answer, want) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("fred's GET %s%s never said %s: %d %s", path, lease, want, code, answer)
		}
	}
}
