package main

import (
	"strings"
	"testing"
)

// leasesFixture is GET /debug/leases as agreed with the read model: a ready
// two-instance lease and a failed one whose budget is exhausted.
const leasesFixture = `{"leases":[
 {"lease_uuid":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c","tenant":"tenant-a","provider_uuid":"p1","status":"ready",
  "created_at":"2025-03-01T10:00:00Z","age_seconds":754.2,"fail_count":0,
  "terminal_budget":{"verdict":"retry","consecutive_failures":0},
  "items":[{"sku":"docker-small","quantity":2,"service_name":"web"}],
  "services":[{"name":"web","instances":[
    {"index":1,"container_id":"bbbbbbbbbbbbbbbbbbbb","state":"running","image":"img","ports":{"8080/tcp":{"host_ip":"127.0.0.1","host_port":"32769"}}},
    {"index":0,"container_id":"aaaaaaaaaaaaaaaaaaaa","state":"running","image":"img","ports":{"8080/tcp":{"host_ip":"127.0.0.1","host_port":"32768"}}}]}]},
 {"lease_uuid":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","tenant":"tenant-b","provider_uuid":"p1","status":"failed",
  "created_at":"2025-03-01T09:00:00Z","age_seconds":90061,"fail_count":3,"reason":"ContainerExited","message":"exited 3",
  "terminal_budget":{"verdict":"exhausted","consecutive_failures":3},
  "items":[{"sku":"docker-small","quantity":1}],"services":[]}
]}`

func TestLeases_Table(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases", leasesFixture)
	got, err := f.run("leases")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, ""+
		"LEASE                                 TENANT    STATUS  AGE     FAILS  BUDGET         SERVICES  PORTS\n"+
		"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c  tenant-a  ready   12m34s  0      retry (0)      web×2     web/0:32768->8080/tcp,web/1:32769->8080/tcp\n"+
		"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10  tenant-b  failed  1d1h    3      exhausted (3)  app×1     -\n")
}

func TestLeases_FiltersAreTheDaemons(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases", `{"leases":[]}`)
	got, err := f.run("leases", "-status", "failed", "-tenant", "tenant b")
	if err != nil {
		t.Fatal(err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0] != "/debug/leases?status=failed&tenant=tenant+b" {
		t.Fatalf("requests %q", reqs)
	}
	wantText(t, got, "LEASE  TENANT  STATUS  AGE  FAILS  BUDGET  SERVICES  PORTS\n")
}

func TestLeases_JSONIsTheDaemonsData(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases", `{"leases":[{"lease_uuid":"x","zeta":1,"alpha":{"b":2,"a":[]}}]}`)
	got, err := f.run("leases", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	// Fields the read model adds appear, in the daemon's order.
	wantText(t, got, `{
  "leases": [
    {
      "lease_uuid": "x",
      "zeta": 1,
      "alpha": {
        "b": 2,
        "a": []
      }
    }
  ]
}
`)
}

func TestLeases_RefusalExits1WithTheAnswer(t *testing.T) {
	f := newFakeDaemon(t)
	f.onStatus("/debug/leases", 503, `{"error":"registry busy"}`)
	_, err := f.run("leases")
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "registry busy") {
		t.Fatalf("a 503: %v", err)
	}
	if _, err := f.run("leases", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "-o") {
		t.Fatalf("-o yaml: %v", err)
	}
}
