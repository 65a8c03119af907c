package messages

import "time"

// The custom-domain DNS gate's part of the operator's debug API: what the
// domaingate actor answers about its gates (GET /debug/domains), and a lease's
// ingress — each instance's name under the wildcard domain and each service's
// custom domain with its gate — in GET /debug/leases/{lease}. The JSON field
// names are a contract with berthctl and the console: add fields, never rename.

// Gate states (DomainGateView.State). Waiting: watched, no check has seen the
// quorum at this host yet. Open: the quorum saw it; the lease's custom_domain
// redeploy is due or under way, and the gate is forgotten once its release is
// Ready. Forgotten: the gate holds nothing for the domain and the running
// release routes it (the lease recorded the opening). Not watched: it holds
// nothing and nothing routes the domain (the lease has not been Ready since it
// was admitted, or the gate is off).
const (
	GateWaiting, GateOpen, GateForgotten, GateNotWatched = "waiting", "open", "forgotten", "not_watched"
)

// DomainGateView is one custom domain's gate as the domaingate actor knows it.
type DomainGateView struct {
	LeaseUUID string    `json:"lease_uuid"`
	Domain    string    `json:"domain"`
	State     string    `json:"state"` // waiting | open (GateForgotten and GateNotWatched are the debug API's, for a domain without a gate)
	Since     time.Time `json:"since,omitzero"`
	// Attempts counts the checks that finished (a miss, or the one that opened it).
	Attempts    int        `json:"attempts"`
	LastResult  string     `json:"last_result,omitempty"` // the last check's verdict
	LastCheckAt *time.Time `json:"last_check_at,omitempty"`
	NextCheckAt *time.Time `json:"next_check_at,omitempty"` // the backoff's next check (waiting only)
	Checking    bool       `json:"checking,omitempty"`      // a check is running now
}

// DebugDomainGates asks the domaingate actor for its gates, of one lease when
// Lease is set, ordered by lease then domain.
type DebugDomainGates struct {
	Lease string
	Reply chan<- DomainGatesReply
}

// DomainGatesReply answers DebugDomainGates.
type DomainGatesReply struct {
	Gates []DomainGateView
}

// DomainsSummary is GET /debug/domains: every gate the domaingate holds.
type DomainsSummary struct {
	Enabled bool             `json:"enabled"` // the gate runs (ingress on)
	Gates   []DomainGateView `json:"gates"`
}

// ServiceIngress is one service of a lease's ingress: its instances' names
// under the wildcard domain (by instance index; none when it has no routable
// TCP port), the custom domain its item asks for, the one its running release
// routes, and that domain's gate.
type ServiceIngress struct {
	Name         string          `json:"name"`
	FQDNs        []string        `json:"fqdns"`
	CustomDomain string          `json:"custom_domain,omitempty"`
	RoutedDomain string          `json:"routed_domain,omitempty"`
	Gate         *DomainGateView `json:"gate,omitempty"` // with a custom domain
}

// LeaseIngress is the "ingress" of GET /debug/leases/{lease}, present when the
// lease has a name under the wildcard domain or a custom domain.
type LeaseIngress struct {
	Services []ServiceIngress `json:"services"`
	// GatesError says why the gates could not be read (the domaingate did not
	// answer); the services' gates are then absent.
	GatesError string `json:"gates_error,omitempty"`
}
