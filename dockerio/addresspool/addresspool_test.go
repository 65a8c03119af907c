package addresspool

import (
	"strings"
	"testing"
)

func TestCapacity_CountsNetworksCutFromEachPool(t *testing.T) {
	for _, c := range []struct {
		pools []Pool
		want  int
	}{
		{nil, DockerDefaultNetworks},
		{[]Pool{{"172.16.0.0/12", 24}}, 4096},
		{[]Pool{{"172.16.0.0/12", 24}, {"192.168.0.0/16", 20}}, 4096 + 16},
		{[]Pool{{"10.0.0.0/8", 24}}, 65536},
		{[]Pool{{"10.0.0.0/24", 24}}, 1},
	} {
		got, err := Capacity(c.pools)
		if err != nil || got != c.want {
			t.Errorf("Capacity(%v) = %d, %v; want %d", c.pools, got, err, c.want)
		}
	}
	for _, bad := range []Pool{{"nonsense", 24}, {"10.0.0.0/16", 8}, {"10.0.0.0/8", 33}} {
		if _, err := Capacity([]Pool{bad}); err == nil {
			t.Errorf("Capacity(%v) accepted", bad)
		}
	}
}

func TestShortfall_OnlyWhenFewerNetworksThanLeases(t *testing.T) {
	if s := Shortfall(30, 30); s != "" {
		t.Errorf("Shortfall(30, 30) = %q, want none", s)
	}
	if s := Shortfall(30, 64); !strings.Contains(s, "30 networks") || !strings.Contains(s, "64 leases") {
		t.Errorf("Shortfall(30, 64) = %q", s)
	}
}
