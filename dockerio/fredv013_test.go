package dockerio

import "testing"

func TestMadeByFredV013_ManagedOfThisBackendAndOfNoBerthInstallation(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"fred v0.13's container", map[string]string{LabelManaged: "true", LabelBackend: "docker", LabelLease: "l"}, true},
		{"fred v0.13's tenant network", map[string]string{LabelManaged: "true", LabelBackend: "docker", LabelTenant: "t"}, true},
		{"a berth installation's", map[string]string{LabelManaged: "true", LabelBackend: "docker", LabelInstallation: "i"}, false},
		{"another backend name's", map[string]string{LabelManaged: "true", LabelBackend: "gpu"}, false},
		{"not managed", map[string]string{LabelBackend: "docker"}, false},
		{"unlabelled", nil, false},
	} {
		if got := MadeByFredV013(c.labels, "docker"); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}
