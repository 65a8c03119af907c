package domaingate

import (
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the gate.
type Settings struct {
	OwnerPath     messages.Address // where CustomDomainReady goes (the registry)
	Resolvers     Resolvers        // custom_domain_dns_resolvers, _quorum, host_address
	CheckDisabled bool             // custom_domain_dns_check_disabled
	CheckTimeout  time.Duration    // one check of every resolver
	BackoffBase   time.Duration    // after the first miss
	BackoffCap    time.Duration
}

// DefaultSettings are the gate's: each query waits 3 s, a check 10 s; misses
// back off 15 s → 15 min (DNS changes propagate in minutes, resolvers cache
// negative answers for up to their SOA minimum).
func DefaultSettings() Settings {
	return Settings{OwnerPath: messages.Registry, Resolvers: Resolvers{Timeout: 3 * time.Second},
		CheckTimeout: 10 * time.Second, BackoffBase: 15 * time.Second, BackoffCap: 15 * time.Minute}
}

// Deps are its collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Settings *Settings
}
