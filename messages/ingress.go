package messages

// DomainGate is the custom-domain DNS readiness gate (actors/domaingate).
const DomainGate Address = "root/domaingate"

// WatchCustomDomain asks the gate to watch a lease's custom domain until DNS
// shows it at this host; asking again for a domain whose gate already opened
// gets CustomDomainReady again (the asker may not have recorded the first).
type WatchCustomDomain struct {
	Lease  string
	Domain string // validated and lower-cased (dockerio/ingress.ValidateCustomDomain)
}

// ForgetCustomDomain ends the gate of a lease's domain ("" Domain: every domain
// of the lease): the lease recorded the opening, dropped the domain or closed.
type ForgetCustomDomain struct {
	Lease  string
	Domain string
}

// CustomDomainReady tells the gate's owner (the registry, which routes it to the
// lease) that a custom domain's DNS gate opened: its router may be added. Sent
// again after every gate restart until the domain is forgotten.
type CustomDomainReady struct {
	Lease  string
	Domain string
}
