package main

// Restart, update and release history on the real Docker engine: the three
// outcomes of a replacement (completed, recovered by recreating the source, the
// source never touched), the maintenance fence, volumes that carry over, a close
// during an update, and bad input that changes nothing.

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// maintain posts a restart (manifest nil) or an update of lease with maintenance ID id,
// retrying the lease-local 409 of a previous completion still in the outbox (its
// row goes a moment after the receiver got it) as providerd does.
func (d *daemonProc) maintain(lease, id string, manifest any) response {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := d.maintainOnce(lease, id, manifest)
		if r.Status != 409 || !strings.Contains(string(r.Body), "still being delivered") || time.Now().After(deadline) {
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// maintainOnce is one restart or update request, answered as is.
func (d *daemonProc) maintainOnce(lease, id string, manifest any) response {
	d.t.Helper()
	req := messages.MaintenanceRequest{LeaseUUID: lease, MaintenanceID: id,
		MaintenanceAdmittedAt: time.Now().UTC().Format(time.RFC3339)}
	uri := "/restart"
	if manifest != nil {
		raw, err := json.Marshal(manifest)
		if err != nil {
			d.t.Fatal(err)
		}
		req.Payload, uri = base64.StdEncoding.EncodeToString(raw), "/update"
	}
	return d.postJSON(uri, req)
}

// releases is GET /releases/{lease}.
func (d *daemonProc) releases(lease string) []messages.Release {
	d.t.Helper()
	r := d.get("/releases/" + lease)
	if r.Status != 200 {
		d.t.Fatalf("GET /releases/%s: %d %s", lease, r.Status, r.Body)
	}
	var out []messages.Release
	r.json(d.t, &out)
	return out
}

// releaseStatuses is the history as "v1:superseded v2:active".
func releaseStatuses(rs []messages.Release) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, "v"+strconv.Itoa(r.Version)+":"+r.Status)
	}
	return strings.Join(parts, " ")
}

// provisionReady provisions a lease with manifest and waits for its success callback.
func provisionReady(t *testing.T, d *daemonProc, cb *callbackReceiver, manifest any, items ...messages.LeaseItem) string {
	t.Helper()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), manifest, items...); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("provision callback: %+v", got[0].Body)
	}
	return lease
}

// hostPort is the published host port of service/index's 8080/tcp.
func hostPort(t *testing.T, d *daemonProc, lease, service string, index int) string {
	t.Helper()
	var info messages.LeaseInfo
	if r := d.get("/info/" + lease); r.Status != 200 {
		t.Fatalf("info: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &info)
	}
	for _, inst := range info.Services[service].Instances {
		if inst.InstanceIndex == index {
			return inst.Ports["8080/tcp"].HostPort
		}
	}
	t.Fatalf("no %s/%d in %+v", service, index, info)
	return ""
}

func containerIDs(t *testing.T, dc *client.Client, lease string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, c := range leaseContainers(t, dc, lease) {
		out[c.ID] = true
	}
	return out
}

// completion waits for the lease's n-th callback and checks it is a maintenance
// completion of id to the lifecycle URL.
func completion(t *testing.T, cb *callbackReceiver, lease string, n int, id, status string) receivedCallback {
	t.Helper()
	c := cb.waitFor(lease, n, 3*time.Minute)[n-1]
	if c.Body.Status != status || c.Body.MaintenanceID != id || c.Body.MaintenanceAdmittedAt == "" ||
		!strings.Contains(c.Path, "lifecycle_id=") {
		t.Fatalf("completion %d = %+v (path %s), want %s with maintenance_id %s to the lifecycle URL", n, c.Body, c.Path, status, id)
	}
	if _, err := time.Parse(time.RFC3339Nano, c.Body.MaintenanceAdmittedAt); err != nil {
		t.Fatalf("maintenance_admitted_at %q: %v", c.Body.MaintenanceAdmittedAt, err)
	}
	return c
}

func TestRestart_ReadyLease_NewContainersPortAnswersSuccessCompletionAndHistory(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	before := containerIDs(t, dc, lease)

	id := uuid.NewString()
	r := d.maintain(lease, id, nil)
	if r.Status != 202 || strings.TrimSpace(string(r.Body)) != `{"status":"restarting"}` {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	if st := d.provisionInfo(lease).Status; st != "restarting" && st != "ready" {
		t.Fatalf("status right after the 202: %s", st)
	}
	completion(t, cb, lease, 2, id, messages.CallbackSuccess)
	after := containerIDs(t, dc, lease)
	if len(after) != 1 {
		t.Fatalf("%d containers after the restart, want 1", len(after))
	}
	for c := range after {
		if before[c] {
			t.Fatalf("container %s survived the restart", c[:12])
		}
	}
	if code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, "app", 0), "/"); err != nil || code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("published port after restart: %d %q %v", code, body, err)
	}
	rels := d.releases(lease)
	if got := releaseStatuses(rels); got != "v1:superseded v2:active" {
		t.Fatalf("releases %s", got)
	}
	for _, rel := range rels {
		raw, err := base64.StdEncoding.DecodeString(rel.Manifest)
		if rel.Image != "stack" || err != nil || !strings.Contains(string(raw), testImage()) {
			t.Fatalf("release %+v: want image stack and the base64 manifest", rel)
		}
	}
	if pi := d.provisionInfo(lease); pi.Status != "ready" || pi.Reason != "" {
		t.Fatalf("after restart: %+v", pi)
	}
	m := string(d.get("/metrics").Body)
	if !strings.Contains(m, `berth_maintenance_total{operation="restart",outcome="completed"} 1`) ||
		!strings.Contains(m, `berth_replace_phase_duration_seconds_count{operation="restart",phase="verify"} 1`) {
		t.Errorf("maintenance metrics missing:\n%s\n%s", grepLines(m, "berth_maintenance_total"), grepLines(m, "berth_replace_phase"))
	}
	d.closeAll(dc, lease)
}

func TestUpdate_ImageAndEnv_NewCohortRunsTheNewConfig(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))

	id := uuid.NewString()
	target := flatManifest(map[string]any{"image": novolumeImage(), "env": map[string]string{"BERTH_UPDATED": "yes"}})
	if r := d.maintain(lease, id, target); r.Status != 202 || !strings.Contains(string(r.Body), `"updating"`) {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, id, messages.CallbackSuccess)
	code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, "app", 0), "/env?name=BERTH_UPDATED")
	if err != nil || code != 200 || strings.TrimSpace(body) != "yes" {
		t.Fatalf("env of the updated cohort: %d %q %v", code, body, err)
	}
	cs := leaseContainers(t, dc, lease)
	if len(cs) != 1 || cs[0].Labels["fred.image_reference"] != novolumeImage() || cs[0].Labels["fred.maintenance_id"] != id {
		t.Fatalf("updated containers %+v", cs)
	}
	if pi := d.provisionInfo(lease); pi.ServiceImages["app"] != novolumeImage() {
		t.Fatalf("service_images %v", pi.ServiceImages)
	}
	if got := releaseStatuses(d.releases(lease)); got != "v1:superseded v2:active" {
		t.Fatalf("releases %s", got)
	}
	d.closeAll(dc, lease)
}

func novolumeImage() string {
	img := testImage()
	return img[:strings.LastIndex(img, ":")] + ":novolume"
}

func TestUpdate_ImageExitsAtStart_SourceRecreatedReadyFailedCompletionAndFailedLogs(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve", "-logs", "2"}}))

	id := uuid.NewString()
	broken := flatManifest(map[string]any{"args": []string{"exit", "-code", "3"}})
	if r := d.maintain(lease, id, broken); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	c := completion(t, cb, lease, 2, id, messages.CallbackFailed)
	if !strings.HasPrefix(c.Body.Error, "UpdateFailed:") || !strings.Contains(c.Body.Error, "restored") {
		t.Fatalf("completion error %q, want UpdateFailed … restored", c.Body.Error)
	}
	pi := d.provisionInfo(lease)
	if pi.Status != "ready" || pi.Reason != messages.ReasonUpdateFailed {
		t.Fatalf("after the compensated update: %+v", pi)
	}
	// The recreated source serves again, with the source's configuration.
	code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, "app", 0), "/")
	if err != nil || code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("recreated source: %d %q %v", code, body, err)
	}
	if n := len(leaseContainers(t, dc, lease)); n != 1 {
		t.Fatalf("%d containers after compensation, want 1", n)
	}
	var logs map[string]string
	lr := d.get("/logs/" + lease)
	lr.json(t, &logs)
	if _, ok := logs["failed/app/0"]; lr.Status != 200 || !ok || logs["app/0"] == "" {
		t.Fatalf("logs %d %v: want the live app/0 and the failed target's failed/app/0", lr.Status, keys(logs))
	}
	if got := releaseStatuses(d.releases(lease)); got != "v1:active v2:failed" {
		t.Fatalf("releases %s", got)
	}
	d.closeAll(dc, lease)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestUpdate_ImageCannotBePulled_SourceKeepsItsContainer(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	before := containerIDs(t, dc, lease)

	id := uuid.NewString()
	missing := flatManifest(map[string]any{"image": "127.0.0.1:5000/berth/does-not-exist:nope"})
	if r := d.maintain(lease, id, missing); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	c := completion(t, cb, lease, 2, id, messages.CallbackFailed)
	if !strings.Contains(c.Body.Error, "ImagePullFailed") {
		t.Fatalf("completion error %q, want the image cause", c.Body.Error)
	}
	after := containerIDs(t, dc, lease)
	if len(after) != 1 || len(before) != 1 {
		t.Fatalf("containers %v → %v", before, after)
	}
	for c := range after {
		if !before[c] {
			t.Fatalf("the source was replaced (%s): a failure before retiring it must leave it untouched", c[:12])
		}
	}
	// An unchanged ready lease keeps its last failed maintenance's specific cause.
	if pi := d.provisionInfo(lease); pi.Status != "ready" || pi.Reason != messages.ReasonImagePullFailed {
		t.Fatalf("after the refused update: %+v", pi)
	}
	d.closeAll(dc, lease)
}

func TestRestart_WhileFirstCompletionUndelivered_409ThenAccepted(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))

	first := uuid.NewString()
	cb.failNext(lease, 2) // the completion's attempts at 0 s and 1 s answer 500; the one at 5 s lands
	if r := d.maintain(lease, first, nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	d.waitStatus(lease, "ready", 2*time.Minute)
	second := uuid.NewString()
	if len(cb.forLease(lease)) == 1 {
		r := d.maintainOnce(lease, second, nil)
		if r.Status != http.StatusConflict {
			t.Fatalf("restart while the first completion is queued: %d %s, want 409", r.Status, r.Body)
		}
		if got := releaseStatuses(d.releases(lease)); got != "v1:superseded v2:active" {
			t.Fatalf("the refused restart changed the history: %s", got)
		}
	} else {
		t.Fatalf("the first completion was delivered before the fence could be seen: %+v", cb.forLease(lease))
	}
	completion(t, cb, lease, 2, first, messages.CallbackSuccess)
	// The row goes once its 2xx is read: the fence reopens a moment after the
	// receiver has it. A 409 is lease-local and retryable.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := d.maintainOnce(lease, second, nil)
		if r.Status == 202 {
			break
		}
		if r.Status != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("restart after delivery: %d %s", r.Status, r.Body)
		}
	}
	completion(t, cb, lease, 3, second, messages.CallbackSuccess)
	d.closeAll(dc, lease)
}

func TestRestart_FailedLease_ReachesReady(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	if err := dc.ContainerKill(t.Context(), leaseContainers(t, dc, lease)[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	d.waitStatus(lease, "failed", time.Minute)
	cb.waitFor(lease, 2, time.Minute) // the runtime failure's callback

	id := uuid.NewString()
	if r := d.maintain(lease, id, nil); r.Status != 202 {
		t.Fatalf("restart of a failed lease: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 3, id, messages.CallbackSuccess)
	if pi := d.provisionInfo(lease); pi.Status != "ready" || pi.FailCount != 1 {
		t.Fatalf("restarted lease %+v", pi)
	}
	if n := len(leaseContainers(t, dc, lease)); n != 1 {
		t.Fatalf("%d containers, want the one restarted", n)
	}
	d.closeAll(dc, lease)
}

func TestRestartAndUpdate_StatefulVolumeFileSurvives(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "sku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}}").startInProcess()
	item := messages.LeaseItem{SKU: "stateful", Quantity: 1}
	lease := provisionReady(t, d, cb, flatManifest(nil), item)
	hp := hostPort(t, d, lease, "app", 0)
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+hp+"/file?path=/data/kept.txt", strings.NewReader("tenant data"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("write /data: %v %v", resp, err)
	}
	read := func(when string) {
		t.Helper()
		code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, "app", 0), "/file?path=/data/kept.txt")
		if err != nil || code != 200 || body != "tenant data" {
			t.Fatalf("after %s /data/kept.txt: %d %q %v", when, code, body, err)
		}
	}
	restart := uuid.NewString()
	if r := d.maintain(lease, restart, nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, restart, messages.CallbackSuccess)
	read("restart")
	update := uuid.NewString()
	if r := d.maintain(lease, update, flatManifest(map[string]any{"env": map[string]string{"V": "2"}})); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 3, update, messages.CallbackSuccess)
	read("update")
	d.closeAll(dc, lease)
}

func TestClose_DuringUpdate_FailedCompletionThenDeprovisionedNothingLeft(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))

	id := uuid.NewString()
	// A target whose health check passes only after a minute: the update stays in
	// verification until the close.
	slow := flatManifest(map[string]any{"args": []string{"serve", "-health-after", "60s"}, "health_check": healthCheckWithStart("120s")})
	if r := d.maintain(lease, id, slow); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		cs := leaseContainers(t, dc, lease)
		if len(cs) == 1 && cs[0].Labels["fred.maintenance_id"] == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the update's target never started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.deprovisionUntilGone(lease)
	got := cb.waitFor(lease, 3, time.Minute)
	if got[1].Body.Status != messages.CallbackFailed || got[1].Body.MaintenanceID != id ||
		!strings.HasPrefix(got[1].Body.Error, "UpdateFailed:") || got[2].Body.Status != messages.CallbackDeprovisioned {
		t.Fatalf("callbacks after the close %+v: want the update's failed completion, then deprovisioned", got[1:])
	}
	assertGone(t, dc, lease)
	assertPoolEmpty(t, d)
}

func TestUpdate_TwoServiceStack_BothServicesReplaced(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	stack := func(version string) map[string]any {
		svc := func() map[string]any {
			return map[string]any{"image": testImage(), "ports": map[string]any{"8080/tcp": map[string]any{}},
				"env": map[string]string{"STACK_VERSION": version}}
		}
		web := svc()
		web["depends_on"] = map[string]any{"db": map[string]any{"condition": "service_started"}}
		return map[string]any{"services": map[string]any{"web": web, "db": svc()}}
	}
	items := []messages.LeaseItem{{SKU: "docker-micro", Quantity: 1, ServiceName: "web"}, {SKU: "docker-micro", Quantity: 1, ServiceName: "db"}}
	lease := provisionReady(t, d, cb, stack("1"), items...)
	id := uuid.NewString()
	if r := d.maintain(lease, id, stack("2")); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, id, messages.CallbackSuccess)
	for _, svc := range []string{"web", "db"} {
		code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, svc, 0), "/env?name=STACK_VERSION")
		if err != nil || code != 200 || strings.TrimSpace(body) != "2" {
			t.Fatalf("%s after the update: %d %q %v", svc, code, body, err)
		}
	}
	if n := len(leaseContainers(t, dc, lease)); n != 2 {
		t.Fatalf("%d containers, want web and db", n)
	}
	d.closeAll(dc, lease)
}

// TestMaintenance_BadInput_ExactStatusAndNothingChanged: every refusal has its
// exact status and code, journals nothing and touches no container.
func TestMaintenance_BadInput_ExactStatusAndNothingChanged(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	used := uuid.NewString()
	if r := d.maintain(lease, used, nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, used, messages.CallbackSuccess)
	before := containerIDs(t, dc, lease)
	history := releaseStatuses(d.releases(lease))

	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name       string
		uri        string
		body       any
		status     int
		validation string
	}{
		{"invalid manifest", "/update", messages.MaintenanceRequest{LeaseUUID: lease, Payload: b64(`{"image":""}`)}, 400, "invalid_manifest"},
		{"unknown field", "/update", messages.MaintenanceRequest{LeaseUUID: lease, Payload: b64(`{"image":"` + testImage() + `","bogus":1}`)}, 400, "invalid_manifest"},
		{"changed service names", "/update", messages.MaintenanceRequest{LeaseUUID: lease,
			Payload: b64(`{"services":{"other":{"image":"` + testImage() + `"}}}`)}, 400, "invalid_manifest"},
		{"image not allowed", "/update", messages.MaintenanceRequest{LeaseUUID: lease, Payload: b64(`{"image":"quay.io/x/y:1"}`)}, 400, "image_not_allowed"},
		{"no payload", "/update", messages.MaintenanceRequest{LeaseUUID: lease}, 400, ""},
		{"unknown lease", "/restart", messages.MaintenanceRequest{LeaseUUID: uuid.NewString()}, 404, ""},
		{"non-UUID lease", "/restart", messages.MaintenanceRequest{LeaseUUID: "not-a-uuid"}, 400, ""},
		{"reused maintenance ID", "/restart", messages.MaintenanceRequest{LeaseUUID: lease, MaintenanceID: used}, 409, ""},
		{"malformed maintenance ID", "/restart", messages.MaintenanceRequest{LeaseUUID: lease, MaintenanceID: "abc"}, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := d.postJSON(tc.uri, tc.body)
			var body messages.ErrorBody
			_ = json.Unmarshal(r.Body, &body)
			if r.Status != tc.status || body.ValidationCode != tc.validation || body.Error == "" {
				t.Fatalf("%s: %d %s, want %d validation_code %q", tc.uri, r.Status, r.Body, tc.status, tc.validation)
			}
		})
	}
	if r := d.call(http.MethodPost, "/update", []byte(`{"lease_uuid":`)); r.Status != 400 {
		t.Fatalf("malformed JSON: %d %s", r.Status, r.Body)
	}
	if got := releaseStatuses(d.releases(lease)); got != history {
		t.Fatalf("bad input changed the history: %s → %s", history, got)
	}
	after := containerIDs(t, dc, lease)
	for c := range after {
		if !before[c] {
			t.Fatalf("bad input replaced a container")
		}
	}
	if len(cb.forLease(lease)) != 2 {
		t.Fatalf("bad input sent a callback: %+v", cb.forLease(lease))
	}
	if r := d.get("/releases/" + uuid.NewString()); r.Status != 404 {
		t.Fatalf("releases of an unknown lease: %d", r.Status)
	}
	d.closeAll(dc, lease)
}
