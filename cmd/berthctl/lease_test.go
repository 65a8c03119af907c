package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const leaseID = "0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c"

// leaseDetailFixture is GET /debug/leases/{lease} of a lease in status.
func leaseDetailFixture(status string) string {
	return `{"lease":{"lease_uuid":"` + leaseID + `","tenant":"tenant-a","provider_uuid":"p1","status":"` + status + `",
  "created_at":"2025-03-01T10:00:00Z","age_seconds":65,"fail_count":1,"reason":"ImagePullFailed","message":"could not\nbe pulled",
  "terminal_budget":{"verdict":"retry","consecutive_failures":0},
  "items":[{"sku":"docker-small","quantity":1,"service_name":"web"}],
  "services":[{"name":"web","instances":[{"index":0,"container_id":"0123456789abcdef0123","state":"exited","image":"img","ports":{}}]}]},
 "events":[
  {"seq":65,"type":"provision.started","at":"2025-03-01T10:00:00.012Z","summary":"provision.started: generation 1, release v1","data":{}},
  {"seq":66,"type":"provision.succeeded","at":"2025-03-01T10:00:01.5Z","summary":"v1 active","data":{}}],
 "compacted_before_seq":65,
 "callbacks":[
  {"delivery_id":"d1","kind":"operation","status":"success","url_path":"/cb","created_at":"2025-03-01T10:00:01Z","state":"delivered","attempts":1,"delivered_at":"2025-03-01T10:00:01Z"},
  {"delivery_id":"d2","kind":"maintenance","status":"failed","url_path":"/cb","created_at":"2025-03-01T10:00:02Z","state":"queued","attempts":2,"last_error":"callback answered 500\tInternal  Server Error"}],
 "releases":[
  {"version":1,"image":"stack","status":"superseded","created_at":"2025-03-01T10:00:00Z","manifest":"e30=","operation_id":"op-1"},
  {"version":2,"image":"stack","status":"active","created_at":"2025-03-01T10:00:02Z","manifest":"e30=","maintenance_id":"m-2"}],
 "diagnostics":[{"kind":"provision","service":"web","index":0,"at":"2025-03-01T10:00:03Z","bytes":2048,"reason":"ContainerExited","state":"exited"}]}`
}

const leaseInfoFixture = `{"host":"127.0.0.1","instances":[],"services":{"web":{"instances":[
 {"instance_index":0,"container_id":"fedcba987654","image":"img","status":"running","ports":{"8080/tcp":{"host_ip":"127.0.0.1","host_port":"32768"}}}]}}}`

const leaseSections = `
events (journal compacted before seq 65):
SEQ  TIME                      TYPE                 SUMMARY
65   2025-03-01T10:00:00.012Z  provision.started    generation 1, release v1
66   2025-03-01T10:00:01.500Z  provision.succeeded  v1 active

releases:
VERSION  STATUS      CREATED               OPERATION        REASON
v1       superseded  2025-03-01T10:00:00Z  operation op-1   -
v2       active      2025-03-01T10:00:02Z  maintenance m-2  -

callbacks:
CREATED               KIND         STATUS   STATE      ATTEMPTS  LAST ERROR
2025-03-01T10:00:01Z  operation    success  delivered  1         -
2025-03-01T10:00:02Z  maintenance  failed   queued     2         callback answered 500 Internal Server Error

diagnostics:
KIND       INSTANCE  AT                    SIZE     STATE   REASON
provision  web/0     2025-03-01T10:00:03Z  2.0 KiB  exited  ContainerExited
`

func leaseBlock(status string) string {
	return "" +
		"lease           " + leaseID + "\n" +
		"tenant          tenant-a\n" +
		"provider        p1\n" +
		"status          " + status + "\n" +
		"created         2025-03-01T10:00:00Z (1m5s ago)\n" +
		"fail_count      1\n" +
		"budget          retry (0)\n" +
		"items           web×1 docker-small\n" +
		"reason          ImagePullFailed\n" +
		"message         could not be pulled\n" +
		"retained_until  -\n"
}

func TestLease_ReadyShowsEverySectionAndContainersFromInfo(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, leaseDetailFixture("ready"))
	f.on("/info/"+leaseID, leaseInfoFixture)
	got, err := f.run("lease", leaseID)
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, leaseBlock("ready")+leaseSections+`
containers:
SERVICE  INDEX  CONTAINER     STATUS   PORTS
web      0      fedcba987654  running  32768->8080/tcp
`)
}

func TestLease_NotReadyShowsTheReadModelsContainers(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, leaseDetailFixture("failed"))
	got, err := f.run("lease", "-o", "table", leaseID) // flags before or after the lease
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.requests() {
		if strings.HasPrefix(r, "/info/") {
			t.Fatalf("asked /info of a failed lease: %q", f.requests())
		}
	}
	wantText(t, got, leaseBlock("failed")+leaseSections+`
containers (the read model's; GET /info answers only while ready):
SERVICE  INDEX  CONTAINER     STATUS  PORTS
web      0      0123456789ab  exited  -
`)
}

func TestLease_EmptySectionsSayNone(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, `{"lease":{"lease_uuid":"`+leaseID+`","status":"provisioning"},"events":[],"callbacks":[],"releases":[],"diagnostics":[]}`)
	got, err := f.run("lease", leaseID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"events: none", "releases: none", "callbacks: none", "diagnostics: none", "containers (the read model's; GET /info answers only while ready): none"} {
		if !strings.Contains(got, "\n"+s+"\n") {
			t.Fatalf("no %q in\n%s", s, got)
		}
	}
}

func TestLease_SaysWhatTheReadModelCouldNotRead(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, `{"lease":{"lease_uuid":"`+leaseID+`","status":"failing","instances_error":"lease actor did not answer: busy"},
 "events":[],"callbacks":[],"releases":[],"diagnostics":[],"releases_error":"registry busy"}`)
	got, err := f.run("lease", leaseID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\nreleases (unavailable: registry busy): none\n", "\ncontainers (unavailable: lease actor did not answer: busy): none\n"} {
		if !strings.Contains(got, s) {
			t.Fatalf("no %q in\n%s", s, got)
		}
	}
}

func TestLease_JSONIsTheDetailPlusInfo(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, leaseDetailFixture("ready"))
	f.on("/info/"+leaseID, leaseInfoFixture)
	got, err := f.run("lease", leaseID, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lease struct {
			Status string `json:"status"`
		} `json:"lease"`
		Events []json.RawMessage `json:"events"`
		Info   *struct {
			Host string `json:"host"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if doc.Lease.Status != "ready" || len(doc.Events) != 2 || doc.Info == nil || doc.Info.Host != "127.0.0.1" {
		t.Fatalf("%+v\n%s", doc, got)
	}
	if !strings.HasPrefix(got, "{\n  \"lease\": {\n    \"lease_uuid\"") || !strings.HasSuffix(got, "\n}\n") {
		t.Fatalf("not the daemon's order, indented:\n%s", got)
	}

	f.on("/debug/leases/"+leaseID, leaseDetailFixture("failed"))
	got, err = f.run("lease", leaseID, "-o", "json")
	if err != nil || !strings.Contains(got, "\n  \"info\": null\n}") {
		t.Fatalf("a lease that is not ready has no info: %v\n%s", err, got)
	}
}

func TestLease_UnknownLeaseExits1WithTheAnswer(t *testing.T) {
	f := newFakeDaemon(t)
	f.onStatus("/debug/leases/"+leaseID, 404, `{"error":"no such lease"}`)
	if _, err := f.run("lease", leaseID); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such lease") {
		t.Fatalf("an unknown lease: %v", err)
	}
	if _, err := f.run("lease", "not-a-uuid"); err == nil || !strings.Contains(err.Error(), "canonical UUID") {
		t.Fatalf("a malformed lease: %v", err)
	}
	if _, err := f.run("lease"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("no lease: %v", err)
	}
}

func TestLease_InfoLeftReadyMeanwhileIsNoError(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, leaseDetailFixture("ready"))
	f.onStatus("/info/"+leaseID, 404, `{"error":"not ready"}`)
	got, err := f.run("lease", leaseID)
	if err != nil || !strings.Contains(got, "containers (the read model's") {
		t.Fatalf("%v\n%s", err, got)
	}
	f.onStatus("/info/"+leaseID, 500, `{"error":"docker down"}`)
	if _, err := f.run("lease", leaseID); err == nil || !strings.Contains(err.Error(), "docker down") {
		t.Fatalf("a 500 from /info: %v", err)
	}
}

func TestWithField_KeepsTheObjectsBytes(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:   `{"a":1,"info":null}`,
		` {} `:      `{"info":null}`,
		`{"b":{} }`: `{"b":{} ,"info":null}`,
	} {
		got, err := withField([]byte(in), "info", []byte("null"))
		if err != nil || string(got) != want {
			t.Fatalf("%s: %s %v", in, got, err)
		}
	}
	if _, err := withField([]byte(`[1]`), "info", []byte("null")); err == nil {
		t.Fatal("an array is not an object")
	}
}
