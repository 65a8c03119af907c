package messages

// POST /reconcile_custom_domain: providerd, every reconcile tick, names the
// custom domain each service of an active lease should have.

// ReconcileCustomDomainRequest is the body of POST /reconcile_custom_domain.
type ReconcileCustomDomainRequest struct {
	LeaseUUID string      `json:"lease_uuid"`
	Items     []LeaseItem `json:"items"`
}

// ReconcileDomains asks the registry to bring a lease's custom domains to what
// Items name (service_name, custom_domain; SKUs and quantities are not looked
// at). A nil error means 204: nothing to do, or the change is journaled and
// its redeploy (or DNS gate) admitted.
type ReconcileDomains struct {
	Lease string
	Items []LeaseItem
	Reply chan<- error
}

// DomainsReconciled is a lease actor's answer to the reconcile the registry
// handed it, sent to the registry, which answers Reply: the lease's report
// of the change reaches the registry first, so the registry's claim on the
// domains ends only when the report holds them.
type DomainsReconciled struct {
	Lease string
	Err   error
	Reply chan<- error
}
