package ingress

import "testing"

func TestSelectPort_SeedOrder_HintThen80Then8080ThenLowestTCP(t *testing.T) {
	tcp := func(n ...int) []Port {
		var ps []Port
		for _, p := range n {
			ps = append(ps, Port{Number: p, Protocol: "tcp"})
		}
		return ps
	}
	cases := []struct {
		name  string
		ports []Port
		hint  int
		want  int
		ok    bool
	}{
		{"hint wins over 80 and 8080", tcp(80, 8080, 3000), 3000, 3000, true},
		{"80 over 8080 and lower ports", tcp(22, 8080, 80), 0, 80, true},
		{"8080 over a lower port", tcp(8080, 3000), 0, 8080, true},
		{"lowest TCP port otherwise", tcp(9000, 3000, 5000), 0, 3000, true},
		{"udp never routable", []Port{{53, "udp"}, {80, "udp"}, {9000, "tcp"}}, 0, 9000, true},
		{"udp 80 does not beat tcp 8080", []Port{{80, "udp"}, {8080, "tcp"}}, 0, 8080, true},
		{"empty protocol is tcp", []Port{{8080, ""}}, 0, 8080, true},
		{"hint naming no tcp port is ignored", []Port{{53, "udp"}, {8080, "tcp"}}, 53, 8080, true},
		{"only udp: no ingress", []Port{{53, "udp"}}, 0, 0, false},
		{"no ports: no ingress", nil, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := SelectPort(c.ports, c.hint)
			if got != c.want || ok != c.ok {
				t.Fatalf("SelectPort = %d %v, want %d %v", got, ok, c.want, c.ok)
			}
		})
	}
}
