package api_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// ---- GET /health ----

func TestHealth_AsksRegistryAndWatcher_200WhenBothAreWell(t *testing.T) {
	e := newEnv(t)
	r := e.do(http.MethodGet, "/health", nil, "-")
	if r.status != http.StatusOK || string(r.body) != `{"status":"healthy"}`+"\n" {
		t.Fatalf("%d %s, want 200 {\"status\":\"healthy\"} and no detail", r.status, r.body)
	}
	asked := fmt.Sprint(e.s.log())
	if !strings.Contains(asked, "registry health") || !strings.Contains(asked, "docker health") {
		t.Fatalf("asked %s, want both the registry and the watcher", asked)
	}
}

func TestHealth_DetailIsShownWhileHealthy(t *testing.T) {
	e := newEnv(t)
	e.s.set(func(s *script) { s.health.Detail = []string{"state.db opened on its meta fallback page"} })
	r := e.do(http.MethodGet, "/health", nil, "-")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var got struct {
		Status string   `json:"status"`
		Detail []string `json:"detail"`
	}
	_ = json.Unmarshal(r.body, &got)
	if got.Status != "healthy" || len(got.Detail) != 1 || got.Detail[0] != "state.db opened on its meta fallback page" {
		t.Fatalf("body %s", r.body)
	}
}

func TestHealth_503WithTheReason(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*script)
		want  string
	}{
		{"registry recovering", func(s *script) { s.health = messages.HealthReply{Reason: "startup recovery in progress"} }, "startup recovery in progress"},
		{"store unhealthy", func(s *script) {
			s.health = messages.HealthReply{Reason: "state store unhealthy", Detail: []string{"x"}}
		}, "state store unhealthy"},
		{"registry not ready, no reason", func(s *script) { s.health = messages.HealthReply{} }, "not ready"},
		{"docker unreachable", func(s *script) { s.docker = messages.DockerHealthReply{Reason: "docker engine unreachable"} }, "docker engine unreachable"},
		{"docker unreachable, no reason", func(s *script) { s.docker = messages.DockerHealthReply{} }, "docker engine unreachable"},
		{"registry silent", func(s *script) { s.silent["registry"] = true }, "registry not answering"},
		{"watcher silent", func(s *script) { s.silent["watcher"] = true }, "docker watcher not answering"},
		{"diagnostics.db unhealthy", func(s *script) { s.diag = errors.New("diagnostics.db is not writable") }, "diagnostics store unhealthy"},
		{"volume root unproven: the proof's reason", func(s *script) {
			s.volRoot = errors.New("volume root unproven: /srv/v: it is on ext4 now, not on the btrfs it was on at start: that filesystem is not mounted there (2 volume operations held until it is mounted again)")
		}, "volume root unproven: /srv/v: it is on ext4 now, not on the btrfs it was on at start: that filesystem is not mounted there (2 volume operations held until it is mounted again)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.s.set(c.setup)
			r := e.do(http.MethodGet, "/health", nil, "-")
			m := r.json(t)
			if r.status != http.StatusServiceUnavailable || m["status"] != "unhealthy" || m["error"] != c.want {
				t.Fatalf("%d %s, want 503 unhealthy %q", r.status, r.body, c.want)
			}
			if _, ok := m["detail"]; ok {
				t.Fatalf("detail shown on a 503: %s", r.body)
			}
		})
	}
}

// ---- POST /restore ----

// TestRestore_RegistryAnswers_MappedExactly: the registry decides a restore; its
// answer maps to CONTRACT.md — 202 {"status":"restoring"}, a bare 422 (nothing
// retained: no body, no code), 422 {"code":"demote_exceeds_tier"}, a bare 409 (the
// source is being restored), 409 already_provisioned, 400, 503.
func TestRestore_RegistryAnswers_MappedExactly(t *testing.T) {
	req := messages.RestoreRequest{LeaseUUID: lease, FromLeaseUUID: otherLease, Tenant: "t",
		Items: []messages.LeaseItem{{SKU: "s", Quantity: 1}}, CallbackURL: "http://fred.example/cb"}
	for _, c := range []struct {
		name   string
		answer error
		status int
		body   string // "" = bare
	}{
		{"accepted", nil, http.StatusAccepted, `{"status":"restoring"}`},
		{"nothing retained", messages.Refuse(messages.ErrNotRetained, "nothing retained"), http.StatusUnprocessableEntity, ""},
		{"demote", messages.Refuse(messages.ErrDemoteExceedsTier, "too big"), http.StatusUnprocessableEntity, `"code":"demote_exceeds_tier"`},
		{"being restored", messages.Refuse(messages.ErrInvalidState, "busy"), http.StatusConflict, ""},
		{"destination exists", messages.Refuse(messages.ErrAlreadyProvisioned, "exists"), http.StatusConflict, `"code":"already_provisioned"`},
		{"shape", messages.Refuse(messages.ErrInvalidManifest, "shape"), http.StatusBadRequest, `"validation_code":"invalid_manifest"`},
		{"capacity", messages.Refuse(messages.ErrInsufficientResources, "full"), http.StatusServiceUnavailable, `"code":"insufficient_resources"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.s.set(func(s *script) { s.restore = c.answer })
			r := e.post("/restore", req)
			switch {
			case r.status != c.status:
				t.Fatalf("%d %q, want %d", r.status, r.body, c.status)
			case c.body == "" && len(r.body) != 0:
				t.Fatalf("%d %q, want a bare answer", r.status, r.body)
			case c.body != "" && !strings.Contains(string(r.body), c.body):
				t.Fatalf("%d %q, want %s", r.status, r.body, c.body)
			}
			if got := e.s.log(); len(got) != 1 || got[0].(messages.Restore).Req.FromLeaseUUID != otherLease {
				t.Fatalf("asked %v, want one Restore of %s", got, otherLease)
			}
		})
	}
}

func TestRestore_BadInput_400(t *testing.T) {
	e := newEnv(t)
	for name, body := range map[string]string{
		"malformed JSON":          `{"lease_uuid":`,
		"trailing data":           `{"lease_uuid":"` + lease + `","from_lease_uuid":"` + otherLease + `"} {}`,
		"bad lease_uuid":          `{"lease_uuid":"` + strings.ToUpper(lease) + `","from_lease_uuid":"` + otherLease + `"}`,
		"missing from_lease_uuid": `{"lease_uuid":"` + lease + `"}`,
		"bad from_lease_uuid":     `{"lease_uuid":"` + lease + `","from_lease_uuid":"../etc"}`,
	} {
		r := e.do(http.MethodPost, "/restore", []byte(body), "")
		if r.status != http.StatusBadRequest || r.json(t)["error"] == "" {
			t.Errorf("%s: %d %s, want 400 with an error", name, r.status, r.body)
		}
	}
	if r := e.do(http.MethodPost, "/restore", []byte(`{}`), "-"); r.status != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", r.status)
	}
}

// ---- POST /restart, /update ----

func TestRestart_Accepted202AsksTheRegistryWithADerivedID(t *testing.T) {
	e := newEnv(t)
	r := e.post("/restart", messages.MaintenanceRequest{LeaseUUID: lease, CallbackURL: "http://127.0.0.1:9100/cb?operation_id=o"})
	if r.status != http.StatusAccepted || string(r.body) != `{"status":"restarting"}`+"\n" {
		t.Fatalf("%d %s, want 202 restarting", r.status, r.body)
	}
	got := e.s.maintains()
	if len(got) != 1 {
		t.Fatalf("registry asked %d times, want 1", len(got))
	}
	m := got[0]
	if m.Kind != messages.MaintenanceRestart || m.Req.LeaseUUID != lease || m.Req.CallbackURL != "http://127.0.0.1:9100/cb?operation_id=o" {
		t.Errorf("Maintain = %+v", m)
	}
	if !uuidV4.MatchString(m.MaintenanceID) {
		t.Errorf("derived maintenance ID %q is not a canonical UUIDv4", m.MaintenanceID)
	}
	if !m.AdmittedAt.Equal(e.now) || m.AdmittedAt.Location() != time.UTC {
		t.Errorf("AdmittedAt = %v, want the receipt time %v in UTC", m.AdmittedAt, e.now.UTC())
	}
}

func TestUpdate_Accepted202WithTheRequestAsSent(t *testing.T) {
	e := newEnv(t)
	req := messages.MaintenanceRequest{LeaseUUID: lease, Payload: "eyJpbWFnZSI6Im5naW54In0=", PayloadHash: "ab",
		MaintenanceID: "1b4e28ba-2fa1-4d2e-883f-0016d3cca427", MaintenanceAdmittedAt: "2030-01-02T03:04:05.5+02:00"}
	r := e.post("/update", req)
	if r.status != http.StatusAccepted || string(r.body) != `{"status":"updating"}`+"\n" {
		t.Fatalf("%d %s, want 202 updating", r.status, r.body)
	}
	got := e.s.maintains()
	if len(got) != 1 {
		t.Fatalf("registry asked %d times", len(got))
	}
	m := got[0]
	want := time.Date(2030, 1, 2, 1, 4, 5, 500_000_000, time.UTC)
	if m.Kind != messages.MaintenanceUpdate || m.Req != req || m.MaintenanceID != req.MaintenanceID {
		t.Errorf("Maintain = %+v, want the request and its own maintenance_id", m)
	}
	if !m.AdmittedAt.Equal(want) || m.AdmittedAt.Location() != time.UTC {
		t.Errorf("AdmittedAt = %v, want %v (the body's, in UTC)", m.AdmittedAt, want)
	}
}

func TestMaintenance_BadInput_400WithoutAsking(t *testing.T) {
	good := `"lease_uuid":"` + lease + `","payload":"e30="`
	cases := []struct{ name, path, body, want string }{
		{"malformed JSON", "/restart", `{"lease_uuid":`, "malformed"},
		{"not an object", "/update", `[]`, "malformed"},
		{"trailing data", "/restart", `{"lease_uuid":"` + lease + `"}x`, "malformed"},
		{"missing lease", "/restart", `{}`, "lease_uuid"},
		{"upper-case lease", "/restart", `{"lease_uuid":"` + strings.ToUpper(lease) + `"}`, "lease_uuid"},
		{"lease with braces", "/update", `{"lease_uuid":"{` + lease + `}","payload":"e30="}`, "lease_uuid"},
		{"update without payload", "/update", `{"lease_uuid":"` + lease + `"}`, "payload"},
		{"maintenance_id not a UUID", "/restart", `{` + good + `,"maintenance_id":"m-1"}`, "maintenance_id"},
		{"maintenance_id upper-case", "/update", `{` + good + `,"maintenance_id":"1B4E28BA-2FA1-4D2E-883F-0016D3CCA427"}`, "maintenance_id"},
		{"maintenance_id v1", "/update", `{` + good + `,"maintenance_id":"1b4e28ba-2fa1-11d2-883f-0016d3cca427"}`, "maintenance_id"},
		{"maintenance_id bad variant", "/update", `{` + good + `,"maintenance_id":"1b4e28ba-2fa1-4d2e-c83f-0016d3cca427"}`, "maintenance_id"},
		{"admitted_at not RFC 3339", "/restart", `{` + good + `,"maintenance_admitted_at":"yesterday"}`, "maintenance_admitted_at"},
		{"admitted_at without zone", "/update", `{` + good + `,"maintenance_admitted_at":"2030-01-02T03:04:05"}`, "maintenance_admitted_at"},
		{"admitted_at unix seconds", "/update", `{` + good + `,"maintenance_admitted_at":"1750000000"}`, "maintenance_admitted_at"},
		{"callback to berthd's debug listener", "/restart", `{` + good + `,"callback_url":"http://` + debugListen + `/debug/chaos/crash?actor=root"}`, "berthd itself"},
		{"callback to berthd's API via localhost", "/update", `{` + good + `,"callback_url":"http://localhost:19001/deprovision"}`, "berthd itself"},
		{"callback link-local", "/restart", `{` + good + `,"callback_url":"http://169.254.169.254/"}`, "link-local"},
		{"callback decimal link-local", "/restart", `{` + good + `,"callback_url":"http://2852039166/"}`, "canonical"},
		{"callback not http", "/update", `{` + good + `,"callback_url":"file:///etc/passwd"}`, "http(s)"},
	}
	e := newEnv(t)
	for _, c := range cases {
		r := e.do(http.MethodPost, c.path, []byte(c.body), "")
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.name, r.status, r.body)
			continue
		}
		m := r.json(t)
		if msg, _ := m["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want it to mention %q", c.name, msg, c.want)
		}
		if _, ok := m["validation_code"]; ok {
			t.Errorf("%s: validation_code on a facade-side 400: %s", c.name, r.body)
		}
	}
	if n := len(e.s.maintains()); n != 0 {
		t.Fatalf("registry asked %d times for bad requests", n)
	}
}

func TestMaintenance_RegistryRefusalsMapToTheContract(t *testing.T) {
	cases := []struct {
		err    error
		status int
		body   string
	}{
		{messages.Refuse(messages.ErrNotFound, "lease not found"), 404, `{"error":"lease not found"}`},
		{messages.Refuse(messages.ErrInvalidState, "lease is provisioning"), 409, `{"error":"lease is provisioning"}`},
		{messages.Refuse(messages.ErrInvalidManifest, "bad image"), 400, `{"error":"bad image","validation_code":"invalid_manifest"}`},
		{messages.Refuse(messages.ErrImageNotAllowed, "registry not allowed"), 400, `{"error":"registry not allowed","validation_code":"image_not_allowed"}`},
		{messages.Refuse(messages.ErrUnavailable, "state store unavailable"), 503, `{"error":"state store unavailable"}`},
		{fmt.Errorf("journal: %w", io.ErrClosedPipe), 500, `{"error":"internal error"}`},
	}
	e := newEnv(t)
	for _, c := range cases {
		e.s.set(func(s *script) { s.maintain = c.err })
		for _, path := range []string{"/restart", "/update"} {
			r := e.post(path, messages.MaintenanceRequest{LeaseUUID: lease, Payload: "e30="})
			if r.status != c.status || string(r.body) != c.body+"\n" {
				t.Errorf("%s with %v: %d %s, want %d %s", path, c.err, r.status, r.body, c.status, c.body)
			}
		}
	}
}

func TestMaintenance_SilentRegistry_503(t *testing.T) {
	e := newEnv(t)
	e.s.set(func(s *script) { s.silent["registry"] = true })
	r := e.post("/restart", messages.MaintenanceRequest{LeaseUUID: lease})
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", r.status, r.body)
	}
}

// The derived ID is a function of the signed request: providerd retrying the same
// signed bytes gets the same maintenance, a newly signed request a new one.
func TestMaintenance_DerivedID_StableForTheSameSignedRequestOnly(t *testing.T) {
	e := newEnv(t)
	body := []byte(`{"lease_uuid":"` + lease + `"}`)
	at := time.Now()
	sig := callback.Sign(secret, http.MethodPost, "/restart", body, at)
	for i := 0; i < 2; i++ {
		if r := e.do(http.MethodPost, "/restart", body, sig); r.status != http.StatusAccepted {
			t.Fatalf("attempt %d: %d %s", i, r.status, r.body)
		}
	}
	otherSig := callback.Sign(secret, http.MethodPost, "/restart", body, at.Add(-time.Second))
	if r := e.do(http.MethodPost, "/restart", body, otherSig); r.status != http.StatusAccepted {
		t.Fatalf("re-signed: %d %s", r.status, r.body)
	}
	otherBody := []byte(`{"lease_uuid":"` + lease + `", "callback_url":"http://fred.example/cb"}`)
	if r := e.do(http.MethodPost, "/restart", otherBody, callback.Sign(secret, http.MethodPost, "/restart", otherBody, at)); r.status != http.StatusAccepted {
		t.Fatalf("other body: %d %s", r.status, r.body)
	}
	got := e.s.maintains()
	if len(got) != 4 {
		t.Fatalf("registry asked %d times, want 4", len(got))
	}
	if got[0].MaintenanceID != got[1].MaintenanceID {
		t.Errorf("a byte-identical retry derived %s then %s", got[0].MaintenanceID, got[1].MaintenanceID)
	}
	if got[2].MaintenanceID == got[0].MaintenanceID {
		t.Errorf("a different signature derived the same ID %s", got[2].MaintenanceID)
	}
	if got[3].MaintenanceID == got[0].MaintenanceID || got[3].MaintenanceID == got[2].MaintenanceID {
		t.Errorf("a different body derived a repeated ID %s", got[3].MaintenanceID)
	}
	for _, m := range got {
		if !uuidV4.MatchString(m.MaintenanceID) {
			t.Errorf("derived ID %q is not a canonical UUIDv4", m.MaintenanceID)
		}
	}
	if want := api.DeriveMaintenanceID(lease, sig, body); got[0].MaintenanceID != want {
		t.Errorf("derived %s, DeriveMaintenanceID says %s", got[0].MaintenanceID, want)
	}
}

func TestDeriveMaintenanceID_DependsOnEveryInput(t *testing.T) {
	base := api.DeriveMaintenanceID(lease, "t=1,sha256=aa", []byte("{}"))
	if base != api.DeriveMaintenanceID(lease, "t=1,sha256=aa", []byte("{}")) {
		t.Fatal("not deterministic")
	}
	for name, id := range map[string]string{
		"lease":     api.DeriveMaintenanceID(otherLease, "t=1,sha256=aa", []byte("{}")),
		"signature": api.DeriveMaintenanceID(lease, "t=1,sha256=ab", []byte("{}")),
		"body":      api.DeriveMaintenanceID(lease, "t=1,sha256=aa", []byte("{ }")),
	} {
		if id == base {
			t.Errorf("changing the %s kept the ID %s", name, id)
		}
		if !uuidV4.MatchString(id) {
			t.Errorf("%q is not a canonical UUIDv4", id)
		}
	}
}

// ---- GET /releases/{lease} ----

func TestReleases_200JSONArray(t *testing.T) {
	e := newEnv(t)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e.s.set(func(s *script) {
		s.releases = messages.ReleasesReply{Releases: []messages.Release{
			{Version: 1, Image: "stack", Status: messages.ReleaseSuperseded, CreatedAt: at, Manifest: "e30="},
			{Version: 2, Image: "stack", Status: messages.ReleaseFailed, CreatedAt: at, Reason: "UpdateFailed", Message: "m", Manifest: "e30="},
		}}
	})
	r := e.do(http.MethodGet, "/releases/"+lease, nil, "")
	want := `[{"version":1,"image":"stack","status":"superseded","created_at":"2030-01-01T00:00:00Z","manifest":"e30="},` +
		`{"version":2,"image":"stack","status":"failed","created_at":"2030-01-01T00:00:00Z","reason":"UpdateFailed","message":"m","manifest":"e30="}]` + "\n"
	if r.status != http.StatusOK || string(r.body) != want {
		t.Fatalf("%d %s, want 200 %s", r.status, r.body, want)
	}
	if got := fmt.Sprint(e.s.log()); !strings.Contains(got, lease) {
		t.Errorf("asked %s, want GetReleases for the lease", got)
	}
}

func TestReleases_EmptyIsAnArrayNeverNull(t *testing.T) {
	e := newEnv(t)
	for _, rels := range [][]messages.Release{nil, {}} {
		e.s.set(func(s *script) { s.releases = messages.ReleasesReply{Releases: rels} })
		if r := e.do(http.MethodGet, "/releases/"+lease, nil, ""); r.status != http.StatusOK || string(r.body) != "[]\n" {
			t.Fatalf("%d %q, want 200 []", r.status, r.body)
		}
	}
}

func TestReleases_UnknownOrNonCanonicalLease_404(t *testing.T) {
	e := newEnv(t)
	e.s.set(func(s *script) {
		s.releases = messages.ReleasesReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
	})
	for _, id := range []string{lease, strings.ToUpper(lease), "x"} {
		if r := e.do(http.MethodGet, "/releases/"+id, nil, ""); r.status != http.StatusNotFound || r.json(t)["error"] == "" {
			t.Errorf("%s: %d %s, want 404", id, r.status, r.body)
		}
	}
	if r := e.do(http.MethodGet, "/releases/"+lease, nil, "-"); r.status != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", r.status)
	}
}

// ---- never 501 ----

// Fred's client counts a 501 as a backend failure; five in a row open providerd's
// circuit breaker for every tenant. No route answers one, whatever it is sent.
func TestNoEndpointAnswers501(t *testing.T) {
	e := newEnv(t)
	paths := []string{"/health", "/stats", "/metrics", "/provision", "/deprovision", "/info/" + lease, "/logs/" + lease,
		"/provisions", "/provisions/" + lease, "/retentions", "/reconcile_custom_domain", "/restart", "/update",
		"/restore", "/releases/" + lease, "/nope"}
	bodies := []string{"", `{}`, `{"lease_uuid":"` + lease + `","from_lease_uuid":"` + otherLease + `","payload":"e30="}`}
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			for _, b := range bodies {
				if r := e.do(m, p, []byte(b), ""); r.status == http.StatusNotImplemented {
					t.Errorf("%s %s %s: 501 %s", m, p, b, r.body)
				}
			}
		}
	}
}

// ---- slow clients ----

// The HMAC middleware's read deadlines must reach the connection through the API's
// own ResponseWriter wrapper: with a 200 ms grace a trickling body is cut off at
// the deadline, not at its next byte three seconds later.
func TestSlowBody_ThroughTheAPIWrapper_IsCutOffAtTheDeadline(t *testing.T) {
	e := newEnvWith(t, &hmac.Verifier{Secret: secret, BodyGrace: 200 * time.Millisecond}, time.Second)
	took := trickle(t, e.srv.Listener.Addr().String(), "POST", "/provision", true, 3*time.Second)
	if took > 1500*time.Millisecond {
		t.Fatalf("connection held for %s, want the 200 ms grace to cut it off", took)
	}
}

// Routes that never read a body do not let the server drain a trickling one
// (net/http would, with no deadline, for up to 256 KiB).
func TestSlowBody_OnABodilessRoute_CutOffAfterTheGrace(t *testing.T) {
	e := newEnvWith(t, &hmac.Verifier{Secret: secret, BodyGrace: 200 * time.Millisecond}, 300*time.Millisecond)
	for _, path := range []string{"/health", "/stats", "/metrics", "/nope"} {
		if took := trickle(t, e.srv.Listener.Addr().String(), "GET", path, false, time.Second); took > 2*time.Second {
			t.Errorf("%s: connection held for %s", path, took)
		}
	}
}

// trickle sends a request head announcing a 1000-byte body, then a byte every
// every, and returns when the server has answered and closed the connection.
func trickle(t *testing.T, addr, method, path string, signed bool, every time.Duration) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: berthd\r\nContent-Length: 1000\r\n", method, path)
	if signed {
		head += callback.Header + ": " + callback.Sign(secret, method, path, []byte("x"), time.Now()) + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
		close(closed)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-giveUp:
			return time.Since(start)
		case <-tick.C:
			_, _ = conn.Write([]byte{'x'})
		}
	}
}
