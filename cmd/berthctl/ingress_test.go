package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// leaseWithIngress is GET /debug/leases/{lease} of a ready lease whose app
// service has two named instances and a custom domain waiting at the DNS gate,
// whose api service's custom domain is routed (its gate forgotten), and whose
// worker has no routable port.
const leaseWithIngress = `{"lease":{"lease_uuid":"` + leaseID + `","status":"failed"},"events":[],"callbacks":[],"releases":[],"diagnostics":[],
 "ingress":{"services":[
  {"name":"api","fqdns":["api-0-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test"],"custom_domain":"api.example.org","routed_domain":"api.example.org",
   "gate":{"lease_uuid":"` + leaseID + `","domain":"api.example.org","state":"forgotten","attempts":0}},
  {"name":"app","fqdns":["app-0-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test","app-1-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test"],
   "custom_domain":"shop.example.org",
   "gate":{"lease_uuid":"` + leaseID + `","domain":"shop.example.org","state":"waiting","since":"2025-03-01T10:00:00Z","attempts":3,
    "last_result":"0 of 2 resolvers (need 2): points elsewhere: 198.51.100.9","last_check_at":"2025-03-01T10:01:00Z","next_check_at":"2025-03-01T10:02:00Z"}},
  {"name":"worker","fqdns":[]}]}}`

func TestLease_ShowsEachInstancesFQDNAndEachCustomDomainsGate(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, leaseWithIngress)
	got, err := f.run("lease", leaseID)
	if err != nil {
		t.Fatal(err)
	}
	want := `
fqdns:
SERVICE  INDEX  FQDN
api      0      api-0-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test
app      0      app-0-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test
app      1      app-1-0b6c7e551d2e4f3a8b9c0d1e2f3a4b5c.apps.example.test

custom domains:
SERVICE  DOMAIN            ROUTED  GATE       ATTEMPTS  LAST CHECK            NEXT CHECK            LAST RESULT
api      api.example.org   yes     forgotten  0         -                     -                     -
app      shop.example.org  no      waiting    3         2025-03-01T10:01:00Z  2025-03-01T10:02:00Z  0 of 2 resolvers (need 2): points elsewhere: 198.51.100.9
`
	if !strings.HasSuffix(got, want) {
		t.Fatalf("got\n%s\nwant it to end with\n%s", got, want)
	}

	// -o json keeps the daemon's ingress as it is.
	got, err = f.run("lease", leaseID, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Ingress struct {
			Services []struct {
				Name string `json:"name"`
				Gate *struct {
					State string `json:"state"`
				} `json:"gate"`
			} `json:"services"`
		} `json:"ingress"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil || len(doc.Ingress.Services) != 3 || doc.Ingress.Services[1].Gate.State != "waiting" {
		t.Fatalf("%+v %v\n%s", doc, err, got)
	}
}

func TestLease_IngressUnavailableOrOff(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/leases/"+leaseID, `{"lease":{"lease_uuid":"`+leaseID+`","status":"failed"},"events":[],"callbacks":[],"releases":[],"diagnostics":[],
 "ingress_error":"ask the registry: busy"}`)
	got, err := f.run("lease", leaseID)
	if err != nil || !strings.HasSuffix(got, "\nfqdns: unavailable: ask the registry: busy\n") {
		t.Fatalf("%v\n%s", err, got)
	}
	f.on("/debug/leases/"+leaseID, `{"lease":{"lease_uuid":"`+leaseID+`","status":"failed"},"events":[],"callbacks":[],"releases":[],"diagnostics":[],
 "ingress":{"services":[{"name":"app","fqdns":[],"custom_domain":"shop.example.org"}],"gates_error":"ask the domain gate: busy"}}`)
	got, err = f.run("lease", leaseID)
	if err != nil || !strings.HasSuffix(got, "\nfqdns: none\n\ncustom domains (gates unavailable: ask the domain gate: busy):\n"+
		"SERVICE  DOMAIN            ROUTED  GATE  ATTEMPTS  LAST CHECK  NEXT CHECK  LAST RESULT\n"+
		"app      shop.example.org  no      -     -         -           -           -\n") {
		t.Fatalf("%v\n%s", err, got)
	}
	f.on("/debug/leases/"+leaseID, `{"lease":{"lease_uuid":"`+leaseID+`","status":"failed"},"events":[],"callbacks":[],"releases":[],"diagnostics":[]}`)
	if got, err = f.run("lease", leaseID); err != nil || strings.Contains(got, "fqdns") || strings.Contains(got, "custom domains") {
		t.Fatalf("ingress off shows ingress sections: %v\n%s", err, got)
	}
}

func TestDomains_EveryGateWithItsChecks(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/domains", `{"enabled":true,"gates":[
 {"lease_uuid":"`+leaseID+`","domain":"shop.example.org","state":"waiting","since":"2025-03-01T10:00:00Z","attempts":3,
  "last_result":"0 of 2 resolvers (need 2)","last_check_at":"2025-03-01T10:01:00Z","next_check_at":"2025-03-01T10:02:00Z","checking":true},
 {"lease_uuid":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","domain":"blog.example.org","state":"open","since":"2025-03-01T10:00:00Z","attempts":1,
  "last_result":"2 of 2 resolvers (need 2): at 203.0.113.7","last_check_at":"2025-03-01T10:00:01Z"}]}`)
	got, err := f.run("domains")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, ""+
		"LEASE                                 DOMAIN            GATE                SINCE                 ATTEMPTS  LAST CHECK            NEXT CHECK            LAST RESULT\n"+
		"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c  shop.example.org  waiting (checking)  2025-03-01T10:00:00Z  3         2025-03-01T10:01:00Z  2025-03-01T10:02:00Z  0 of 2 resolvers (need 2)\n"+
		"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10  blog.example.org  open                2025-03-01T10:00:00Z  1         2025-03-01T10:00:01Z  -                     2 of 2 resolvers (need 2): at 203.0.113.7\n"+
		"gates: 2\n")
	f.on("/debug/domains", `{"enabled":false,"gates":[]}`)
	if got, err = f.run("domains"); err != nil || got != "no DNS gate: ingress is off\n" {
		t.Fatalf("%v %q", err, got)
	}
	f.on("/debug/domains", `{"enabled":true,"gates":[]}`)
	if got, err = f.run("domains", "-o", "json"); err != nil || !strings.Contains(got, `"gates": []`) {
		t.Fatalf("%v %q", err, got)
	}
}
