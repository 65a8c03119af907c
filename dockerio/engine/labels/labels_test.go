package labels

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/manifest"
)

func TestContainer_FredLabelsWinOverTenantLabels(t *testing.T) {
	plan := dockerio.Plan{Lease: "L", Tenant: "T", InstallationID: "I", Generation: 3, BackendName: "docker"}
	svc := dockerio.ServicePlan{Service: manifest.Service{Labels: map[string]string{dockerio.LabelLease: "forged", "app": "x"}}, Name: "web"}
	l := Container(plan, svc, 2, time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)))
	want := map[string]string{
		dockerio.LabelLease: "L", dockerio.LabelService: "web", dockerio.LabelInstance: "2", dockerio.LabelGeneration: "3",
		dockerio.LabelManaged: "true", dockerio.LabelRuntimeContract: "2", dockerio.LabelMaintenanceID: "",
		dockerio.LabelCreatedAt: "2025-01-02T02:04:05Z", "app": "x", dockerio.LabelInstallation: "I",
	}
	if !HasAll(l, want) {
		t.Errorf("labels = %v, want at least %v", l, want)
	}
	inst, ok := ParseInstance(l)
	if !ok || inst.Lease != "L" || inst.Service != "web" || inst.Index != 2 || inst.Generation != 3 {
		t.Errorf("ParseInstance = %+v, %v", inst, ok)
	}
}

func TestParseInstance_RejectsUnmanagedOrMalformed(t *testing.T) {
	for name, l := range map[string]map[string]string{
		"unmanaged":   {dockerio.LabelLease: "L", dockerio.LabelService: "a", dockerio.LabelInstance: "0"},
		"no service":  {dockerio.LabelManaged: "true", dockerio.LabelLease: "L", dockerio.LabelInstance: "0"},
		"bad index":   {dockerio.LabelManaged: "true", dockerio.LabelLease: "L", dockerio.LabelService: "a", dockerio.LabelInstance: "x"},
		"neg index":   {dockerio.LabelManaged: "true", dockerio.LabelLease: "L", dockerio.LabelService: "a", dockerio.LabelInstance: "-1"},
		"no lease":    {dockerio.LabelManaged: "true", dockerio.LabelService: "a", dockerio.LabelInstance: "0"},
		"managed=yes": {dockerio.LabelManaged: "yes", dockerio.LabelLease: "L", dockerio.LabelService: "a", dockerio.LabelInstance: "0"},
	} {
		if _, ok := ParseInstance(l); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAgreesWithComposeKey_MatchesComposeKeys(t *testing.T) {
	plans := []dockerio.ServicePlan{{Name: "web", Quantity: 3}, {Name: "db", Quantity: 1}, {Name: "web-0x", Quantity: 1}}
	for key, inst := range dockerio.ComposeKeys(plans) {
		if !AgreesWithComposeKey(key, inst.Service, inst.Index) {
			t.Errorf("ComposeKeys' own %s → %+v disagrees", key, inst)
		}
	}
	for _, c := range []struct {
		key, service string
		index        int
	}{{"web-1", "web", 2}, {"db", "db", 1}, {"web", "db", 0}, {"web-0", "web-0", 1}} {
		if AgreesWithComposeKey(c.key, c.service, c.index) {
			t.Errorf("%s claimed as %s/%d: accepted", c.key, c.service, c.index)
		}
	}
}

func TestHealthFromStatus(t *testing.T) {
	for status, want := range map[string]string{
		"Up 3 minutes (healthy)":          "healthy",
		"Up 1 second (health: starting)":  "starting",
		"Up 2 hours (unhealthy)":          "unhealthy",
		"Up 5 seconds":                    "",
		"Exited (1) 2 minutes ago":        "",
		"Up 3 minutes (healthy) whatever": "",
	} {
		if got := HealthFromStatus(status); got != want {
			t.Errorf("HealthFromStatus(%q) = %q, want %q", status, got, want)
		}
	}
}

func TestNetwork_Ownership(t *testing.T) {
	spec := dockerio.NetworkSpec{Lease: "L", Tenant: "T", BackendName: "docker", InstallationID: "I"}
	n := Network(spec)
	if !HasAll(n, NetworkOwnership(spec)) || n[dockerio.LabelTenant] != "T" || n[dockerio.LabelNetworkScope] != "lease" {
		t.Errorf("network labels = %v", n)
	}
	other := spec
	other.InstallationID = "J"
	if HasAll(n, NetworkOwnership(other)) {
		t.Error("another installation's ownership matched")
	}
}
