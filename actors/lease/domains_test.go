package lease_test

import (
	"testing"

	"github.com/berth-dev/berth/actors/lease"
)

// A provision routes its items' custom domains only ungated; the custom_domain
// maintenance's release routes the domain the gate opened, and a later update
// and restart keep it.
func TestDecide_CustomDomains_UngatedAtProvision_AddedByMaintenance_KeptByUpdateAndRestart(t *testing.T) {
	spec := dspec(1, service("app", "img:1", 2))
	spec.Items[0].CustomDomain = "shop.example.org"
	for _, ungated := range []bool{false, true} {
		st := lease.NewState()
		d := lease.Decide(st, lease.Reprovision{}, lease.Env{Now: t0, Spec: spec, Limits: testLimits, DomainsUngated: ungated})
		for _, ev := range d.Events {
			if err := st.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		if got := st.Latest().Domains["app"]; (got == "shop.example.org") != ungated {
			t.Fatalf("ungated %t: provision release routes %q", ungated, got)
		}
	}

	j := jReady()
	target := *j.st.Running()
	target.Domains = map[string]string{"app": "shop.example.org"}
	drv := &driver{t: t, st: j.st, spec: j.spec}
	drv.step(lease.Maintain{Kind: lease.KindCustomDomain, ID: mID3, AdmittedAt: admittedAt, Target: &target}, j.tick(), "")
	if got := drv.st.Latest(); got.Kind != lease.KindCustomDomain || got.Domains["app"] != "shop.example.org" || drv.st.Status != lease.Restarting {
		t.Fatalf("custom_domain maintenance: %s, release %+v", drv.st.Status, got)
	}
	j.completes()
	drv.step(updateCmd(mID1, service("app", "img:2", 2)), j.tick(), "")
	if got := drv.st.Latest().Domains["app"]; got != "shop.example.org" {
		t.Fatalf("an update dropped the routed custom domain: %q", got)
	}
	j.completes()
	drv.step(restartCmd(mID2), j.tick(), "")
	if got := drv.st.Latest().Domains["app"]; got != "shop.example.org" {
		t.Fatalf("a restart dropped the routed custom domain: %q", got)
	}
}
