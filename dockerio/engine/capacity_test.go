package engine

import "testing"

func TestPoolCapacity_CountsNetworksCutFromEachPool(t *testing.T) {
	for _, c := range []struct {
		pools []addressPool
		want  int
	}{
		{nil, dockerDefaultNetworks},
		{[]addressPool{{"172.16.0.0/12", 24}}, 4096},
		{[]addressPool{{"172.16.0.0/12", 24}, {"192.168.0.0/16", 20}}, 4096 + 16},
		{[]addressPool{{"10.0.0.0/8", 24}}, 65536},
		{[]addressPool{{"10.0.0.0/24", 24}}, 1},
	} {
		got, err := poolCapacity(c.pools)
		if err != nil || got != c.want {
			t.Errorf("poolCapacity(%v) = %d, %v; want %d", c.pools, got, err, c.want)
		}
	}
	for _, bad := range []addressPool{{"nonsense", 24}, {"10.0.0.0/16", 8}, {"10.0.0.0/8", 33}} {
		if _, err := poolCapacity([]addressPool{bad}); err == nil {
			t.Errorf("poolCapacity(%v) accepted", bad)
		}
	}
}
