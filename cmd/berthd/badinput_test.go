package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
)

// port is the port of a host:port address.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// provisionBody is a valid provision request as a map, so rows can break it.
func provisionBody(cb string, manifest any) map[string]any {
	raw, _ := json.Marshal(manifest)
	return map[string]any{
		"lease_uuid": uuid.NewString(), "tenant": "t", "provider_uuid": "p",
		"items":        []map[string]any{{"sku": "docker-small", "quantity": 1}},
		"callback_url": cb, "payload": base64.StdEncoding.EncodeToString(raw),
	}
}

func TestBadInput_ExactStatusNoJournalEventNoDockerObject(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	d := newDaemonDir(t, "max_request_body_size: 65536").startInProcess()
	cb := "http://127.0.0.1:9/callbacks?operation_id=" + uuid.NewString()
	withManifest := func(m any) []byte {
		b, _ := json.Marshal(provisionBody(cb, m))
		return b
	}
	with := func(mut func(map[string]any)) []byte {
		b := provisionBody(cb, flatManifest(nil))
		mut(b)
		out, _ := json.Marshal(b)
		return out
	}
	stack := func(svcs map[string]any) map[string]any { return map[string]any{"services": svcs} }
	img := testImage()
	rows := []struct {
		name, method, uri string
		body              []byte
		status            int
		contains          string
	}{
		{"malformed JSON", "POST", "/provision", []byte(`{"lease_uuid":`), 400, `"error":"malformed JSON body"`},
		{"trailing data", "POST", "/provision", []byte(`{} {}`), 400, `"error":`},
		{"missing lease_uuid", "POST", "/provision", with(func(m map[string]any) { delete(m, "lease_uuid") }), 400, "lease_uuid"},
		{"non-canonical lease_uuid", "POST", "/provision", with(func(m map[string]any) { m["lease_uuid"] = "ABC" }), 400, "lease_uuid"},
		{"missing items", "POST", "/provision", with(func(m map[string]any) { delete(m, "items") }), 400, "items"},
		{"quantity too large", "POST", "/provision", with(func(m map[string]any) {
			m["items"] = []map[string]any{{"sku": "docker-small", "quantity": 1025}}
		}), 400, `"error":`},
		{"missing callback_url", "POST", "/provision", with(func(m map[string]any) { delete(m, "callback_url") }), 400, "callback_url"},
		{"link-local callback", "POST", "/provision", with(func(m map[string]any) { m["callback_url"] = "http://169.254.1.1/x" }), 400, "link-local"},
		// Hostile callback targets: berthd's own listeners in every spelling, and
		// link-local addresses written as octal or a bare decimal.
		{"callback to own debug chaos", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://" + d.debug + "/debug/chaos/crash?actor=root/registry"
		}), 400, "callback_url"},
		{"callback to own API via localhost", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://localhost:" + port(d.api) + "/deprovision"
		}), 400, "callback_url"},
		{"callback to own API via 0.0.0.0", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://0.0.0.0:" + port(d.api) + "/deprovision"
		}), 400, "callback_url"},
		{"callback to own debug via [::1]", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://[::1]:" + port(d.debug) + "/debug/actors"
		}), 400, "callback_url"},
		{"callback octal link-local", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://0251.0376.0251.0376/latest/meta-data"
		}), 400, "callback_url"},
		{"callback decimal link-local", "POST", "/provision", with(func(m map[string]any) {
			m["callback_url"] = "http://2852039166/latest/meta-data"
		}), 400, "callback_url"},
		{"restore malformed JSON", "POST", "/restore", []byte(`{"lease_uuid":`), 400, `"error":`},
		{"restore bad uuid", "POST", "/restore", []byte(`{"lease_uuid":"x","from_lease_uuid":"y"}`), 400, "lease_uuid"},
		{"restart unknown lease", "POST", "/restart", []byte(`{"lease_uuid":"` + uuid.NewString() + `"}`), 404, `"error":`},
		{"releases of unknown lease", "GET", "/releases/" + uuid.NewString(), nil, 404, `"error":`},
		{"missing payload", "POST", "/provision", with(func(m map[string]any) { delete(m, "payload") }), 400, "payload"},
		{"payload not base64", "POST", "/provision", with(func(m map[string]any) { m["payload"] = "!!!" }), 400, `"validation_code":"invalid_manifest"`},
		{"unknown sku", "POST", "/provision", with(func(m map[string]any) {
			m["items"] = []map[string]any{{"sku": "docker-gigantic", "quantity": 1}}
		}), 400, `"validation_code":"unknown_sku"`},
		{"image outside allowlist", "POST", "/provision", withManifest(map[string]any{"image": "ghcr.io/org/app:1"}), 400, `"validation_code":"image_not_allowed"`},
		{"fixed host port", "POST", "/provision", withManifest(map[string]any{"image": img,
			"ports": map[string]any{"8080/tcp": map[string]any{"host_port": 8080}}}), 400, `"validation_code":"invalid_manifest"`},
		{"unknown manifest field", "POST", "/provision", withManifest(map[string]any{"image": img, "privileged": true}), 400, `"validation_code":"invalid_manifest"`},
		{"reserved env", "POST", "/provision", withManifest(map[string]any{"image": img, "env": map[string]string{"LD_PRELOAD": "x"}}), 400, `"validation_code":"invalid_manifest"`},
		{"reserved label", "POST", "/provision", withManifest(map[string]any{"image": img, "labels": map[string]string{"fred.managed": "x"}}), 400, `"validation_code":"invalid_manifest"`},
		{"tmpfs on /proc", "POST", "/provision", withManifest(map[string]any{"image": img, "tmpfs": []string{"/proc/x"}}), 400, `"validation_code":"invalid_manifest"`},
		{"stop_grace_period too long", "POST", "/provision", withManifest(map[string]any{"image": img, "stop_grace_period": "10m"}), 400, `"validation_code":"invalid_manifest"`},
		{"depends_on in flat form", "POST", "/provision", withManifest(map[string]any{"image": img,
			"depends_on": map[string]any{"db": map[string]any{"condition": "service_started"}}}), 400, `"validation_code":"invalid_manifest"`},
		{"services do not match items", "POST", "/provision", withManifest(stack(map[string]any{"web": map[string]any{"image": img}})), 400, `"validation_code":"invalid_manifest"`},
		{"health check NONE with service_healthy", "POST", "/provision", func() []byte {
			b := provisionBody(cb, stack(map[string]any{
				"web": map[string]any{"image": img, "depends_on": map[string]any{"db": map[string]any{"condition": "service_healthy"}}},
				"db":  map[string]any{"image": img, "health_check": map[string]any{"test": []string{"NONE"}}},
			}))
			b["items"] = []map[string]any{{"sku": "docker-small", "quantity": 1, "service_name": "web"}, {"sku": "docker-small", "quantity": 1, "service_name": "db"}}
			out, _ := json.Marshal(b)
			return out
		}(), 400, `"validation_code":"invalid_manifest"`},
		{"oversized body", "POST", "/provision", bytes.Repeat([]byte("x"), 65537), 413, `{"error":"request body too large"}`},
		{"deprovision bad uuid", "POST", "/deprovision", []byte(`{"lease_uuid":"nope"}`), 400, "lease_uuid"},
		{"provisions bad limit", "GET", "/provisions?limit=-1", nil, 400, "limit"},
		{"provisions continue without limit", "GET", "/provisions?continue=" + uuid.NewString(), nil, 400, "continue"},
		{"provisions non-uuid continue", "GET", "/provisions?limit=5&continue=zzz", nil, 400, "continue"},
		{"logs bad tail", "GET", "/logs/" + uuid.NewString() + "?tail=0", nil, 400, "tail"},
		{"unknown route", "GET", "/nope", nil, 404, `{"error":"not found"}`},
		{"wrong method", "GET", "/provision", nil, 405, `{"error":"method not allowed"}`},
		{"info of unknown lease", "GET", "/info/" + uuid.NewString(), nil, 404, `"error":`},
	}
	// Nothing is retained, so a well-formed restore is answered what is true: a
	// bare 422 (no body, no code) — never a 501, which providerd counts as a
	// backend failure.
	restore := fmt.Sprintf(`{"lease_uuid":%q,"from_lease_uuid":%q,"tenant":"t","provider_uuid":"p","items":[{"sku":"docker-small","quantity":1}],"callback_url":%q}`,
		uuid.NewString(), uuid.NewString(), cb)
	if resp := d.call("POST", "/restore", []byte(restore)); resp.Status != 422 || len(bytes.TrimSpace(resp.Body)) != 0 {
		t.Fatalf("restore of nothing retained: %d %q, want a bare 422", resp.Status, resp.Body)
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			resp := d.call(r.method, r.uri, r.body)
			if resp.Status != r.status || !strings.Contains(string(resp.Body), r.contains) {
				t.Fatalf("%s %s: %d %s, want %d containing %s", r.method, r.uri, resp.Status, resp.Body, r.status, r.contains)
			}
			if len(resp.Body) >= 4096 {
				t.Fatalf("error body %d bytes, want < 4 KiB", len(resp.Body))
			}
		})
	}

	// Authentication rows of CONTRACT.md against the real daemon.
	body := withManifest(flatManifest(nil))
	now := time.Now()
	auth := []struct {
		name   string
		header string
		uri    string
		body   []byte
		status int
		want   string
	}{
		{"missing", "", "/provision", body, 401, `{"error":"missing signature"}`},
		{"stale", callback.Sign(d.secret, "POST", "/provision", body, now.Add(-5*time.Minute-2*time.Second)), "/provision", body, 401, `{"error":"invalid signature"}`},
		{"future", callback.Sign(d.secret, "POST", "/provision", body, now.Add(time.Minute+2*time.Second)), "/provision", body, 401, `{"error":"invalid signature"}`},
		{"wrong body", callback.Sign(d.secret, "POST", "/provision", []byte("{}"), now), "/provision", body, 401, `{"error":"invalid signature"}`},
		{"wrong query", callback.Sign(d.secret, "GET", "/provisions?limit=1", nil, now), "/provisions?limit=2", nil, 401, `{"error":"invalid signature"}`},
		{"oversized", callback.Sign(d.secret, "POST", "/provision", body, now), "/provision", bytes.Repeat([]byte("x"), 70000), 413, `{"error":"request body too large"}`},
	}
	for _, a := range auth {
		t.Run("auth "+a.name, func(t *testing.T) {
			method := "POST"
			if a.body == nil {
				method = "GET"
			}
			req, _ := http.NewRequest(method, "http://"+d.api+a.uri, bytes.NewReader(a.body))
			if a.header != "" {
				req.Header.Set(callback.Header, a.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got bytes.Buffer
			_, _ = got.ReadFrom(resp.Body)
			if resp.StatusCode != a.status || strings.TrimSpace(got.String()) != a.want {
				t.Fatalf("%d %q, want %d %s", resp.StatusCode, got.String(), a.status, a.want)
			}
		})
	}

	// Nothing was admitted, journaled or created.
	var list struct {
		Provisions []json.RawMessage `json:"provisions"`
	}
	d.get("/provisions").json(t, &list)
	if len(list.Provisions) != 0 {
		t.Fatalf("refused requests left provisions: %s", list.Provisions)
	}
	assertPoolEmpty(t, d)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop exit %d", code)
	}
	store, _, err := persistence.Open(persistence.Options{Dir: filepath.Join(d.dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	streams, err := store.Streams("")
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 0 {
		t.Fatalf("refused requests journaled streams %v", streams)
	}
	id := store.Identity().InstallationID
	cs, _ := dc.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "fred.installation_id="+id))})
	ns, _ := dc.NetworkList(context.Background(), network.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "fred.installation_id="+id))})
	// The warm pool's free networks are made at start, whatever is asked.
	ns = slices.DeleteFunc(ns, func(n network.Summary) bool { return n.Labels["fred.network_scope"] == "pool" })
	if len(cs)+len(ns) != 0 {
		t.Fatalf("refused requests created %d containers and %d networks", len(cs), len(ns))
	}
}
