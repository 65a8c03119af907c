package ingress

import "slices"

// Port is one container port the manifest declares.
type Port struct {
	Number   int
	Protocol string // "tcp" (or "") | "udp"
}

// routable reports whether Traefik can route HTTP to p: a TCP port.
func (p Port) routable() bool {
	return (p.Protocol == "tcp" || p.Protocol == "") && p.Number > 0 && p.Number <= 65535
}

// SelectPort is the port Traefik routes to, in the seed's order: the manifest's
// ingress hint, then 80, then 8080, then the lowest TCP port. Only TCP ports are
// routable; false when the container has none (it gets no ingress labels). A
// hint that names no TCP port of the container is ignored (the manifest
// validator refuses one; this is the backstop).
func SelectPort(ports []Port, hint int) (int, bool) {
	var tcp []int
	for _, p := range ports {
		if p.routable() {
			tcp = append(tcp, p.Number)
		}
	}
	if len(tcp) == 0 {
		return 0, false
	}
	for _, want := range []int{hint, 80, 8080} {
		if want > 0 && slices.Contains(tcp, want) {
			return want, true
		}
	}
	return slices.Min(tcp), true
}
