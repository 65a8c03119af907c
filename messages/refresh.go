package messages

// The runtime refresh (actors/refresh): an operator's run that recreates the
// Ready leases still running containers of an older runtime contract.

// StartRefresh is POST /runtime_refresh: start a run. Its reply is the status
// with the stale leases read as it started (202), or ErrDisabled (403),
// ErrInvalidState (409: a run is active) or ErrUnavailable (503: the inventory
// could not be read, or the run not journaled).
type StartRefresh struct{ Reply chan<- RefreshReply }

// GetRefresh is GET /runtime_refresh.
type GetRefresh struct{ Reply chan<- RefreshReply }

// RefreshReply answers StartRefresh and GetRefresh.
type RefreshReply struct {
	Status *RuntimeRefreshStatus
	Err    error
}

// RuntimeRefreshStatus is the body of GET /runtime_refresh and of a run's 202:
// what Docker shows now, every live lease's last refresh outcome, and the
// current or most recent run. Every list is sorted and never null.
type RuntimeRefreshStatus struct {
	Contract            int          `json:"contract"`
	Active              bool         `json:"active"`
	Stale               int          `json:"stale"`
	StaleLeases         []string     `json:"stale_leases"`
	InFlight            int          `json:"in_flight"`
	Refreshed           int          `json:"refreshed"`
	Failed              int          `json:"failed"`
	Restored            int          `json:"restored"`
	Skipped             int          `json:"skipped"`
	SharedNetworkLeases []string     `json:"shared_network_leases"`
	Leases              []RefreshRow `json:"leases"`
}

// RefreshRow is one lease's refresh outcome.
type RefreshRow struct {
	LeaseUUID     string           `json:"lease_uuid"`
	MaintenanceID string           `json:"maintenance_id,omitempty"`
	Outcome       string           `json:"outcome"`
	Restored      *RestoredRelease `json:"restored,omitempty"`
}

// Refresh outcomes of a lease.
const RefreshRefreshed, RefreshFailed, RefreshSkipped = "refreshed", "failed", "skipped"

// RestoredRelease is the pre-refresh release a failed refresh left running and
// ready: its version and the sha256 of its manifest.
type RestoredRelease struct {
	ReleaseVersion int    `json:"release_version"`
	ReleaseDigest  string `json:"release_digest"`
}

// GetRefreshReceipt asks a lease (through the registry's Deliver) how its
// runtime_refresh maintenance MaintenanceID stands.
type GetRefreshReceipt struct {
	MaintenanceID string
	Reply         chan<- RefreshReceipt
}

// RefreshReceipt answers GetRefreshReceipt. Read is false when the lease could
// not be asked; Found, when a release of the lease carries the ID; Settled,
// once that maintenance is over, with its outcome (RefreshRefreshed or
// RefreshFailed) and, for a failure the lease came back Ready from, the
// release it restored.
type RefreshReceipt struct {
	Read, Found, Settled bool
	Outcome              string
	Restored             *RestoredRelease
}
