package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// POST /reconcile_custom_domain at the edge: a body or lease UUID the facade can
// refuse is 400 without asking; the registry's nil is 204 with no body; a
// registry that does not answer is the contract's coded 503.

func TestReconcileCustomDomain_RegistryAccepts_204NoBody(t *testing.T) {
	e := newEnv(t)
	r := e.post("/reconcile_custom_domain", messages.ReconcileCustomDomainRequest{LeaseUUID: lease,
		Items: []messages.LeaseItem{{SKU: "docker-small", Quantity: 1, CustomDomain: "shop.example.org"}}})
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("%d %q, want 204 with no body", r.status, r.body)
	}
}

func TestReconcileCustomDomain_BadBodyOrLease_400(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ name, body, want string }{
		{"malformed JSON", `{"lease_uuid":`, "malformed"},
		{"not an object", `[]`, "malformed"},
		{"trailing data", `{"lease_uuid":"` + lease + `"}x`, "malformed"},
		{"missing lease", `{"items":[]}`, "lease_uuid"},
		{"upper-case lease", `{"lease_uuid":"` + strings.ToUpper(lease) + `"}`, "lease_uuid"},
		{"items not a list", `{"lease_uuid":"` + lease + `","items":{}}`, "malformed"},
	} {
		r := e.do(http.MethodPost, "/reconcile_custom_domain", []byte(c.body), "")
		if msg, _ := r.json(t)["error"].(string); r.status != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", c.name, r.status, r.body, c.want)
		}
	}
}

func TestReconcileCustomDomain_SilentRegistry_503LifecyclePending(t *testing.T) {
	e := newEnv(t)
	e.s.set(func(s *script) { s.silent["registry"] = true })
	r := e.post("/reconcile_custom_domain", messages.ReconcileCustomDomainRequest{LeaseUUID: lease})
	if code, _ := r.json(t)["code"].(string); r.status != http.StatusServiceUnavailable || code != "lifecycle_pending" {
		t.Fatalf("%d %s, want 503 lifecycle_pending", r.status, r.body)
	}
}
