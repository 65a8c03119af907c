package messages

import "time"

// Docker's objects as dockerio reports them and the lease's messages carry them.

// Container is one managed container as Docker reports it.
type Container struct {
	ID          string // full ID
	Name        string
	Lease       string
	Service     string
	Index       int
	OperationID string
	Generation  uint64
	Image       string // reference (fred.image_reference)
	ImageID     string
	State       string // created | running | paused | restarting | removing | exited | dead
	Health      string // "" (no check) | starting | healthy | unhealthy
	ExitCode    int
	OOMKilled   bool
	// StartRefused: the daemon answered its start with a final error (a
	// launch's cohort only). A container still created without it was never
	// started: Compose gave up on a dependency first.
	StartRefused bool
	StartedAt    time.Time
	FinishedAt   time.Time
	Ports        map[string]PortBinding // "8080/tcp" → binding
	Labels       map[string]string
	Contract     int      // fred.runtime_contract it was created under (0: before the contract)
	Networks     []string // IDs of the networks it is attached to (listings only)
}

// ImagePin is the recorded content of one service image.
type ImagePin struct {
	Ref    string `json:"ref"`              // manifest reference
	ID     string `json:"id"`               // sha256:… image ID
	Digest string `json:"digest,omitempty"` // repository@sha256:… to re-fetch it by, never by tag
}
