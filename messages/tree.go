package messages

// Messages every actor understands, handled by the common receiver middleware in
// supervisors before the actor's own Receive sees anything.

// Describe asks an actor for its node in the live tree (GET /debug/actors).
type Describe struct {
	Reply chan<- NodeInfo // buffered by the asker; the actor never blocks on it
}

// NodeInfo is one actor as it describes itself.
type NodeInfo struct {
	Path         string `json:"path"` // PID id, e.g. "root/registry"
	Kind         string `json:"kind"`
	State        string `json:"state"` // the actor's own one-line summary
	Restarts     int    `json:"restarts"`
	MailboxDepth int    `json:"mailbox_depth"`
	InFlight     int    `json:"in_flight"` // workers / deliveries running now
	Status       string `json:"status"`    // "ok" | "unresponsive"
	// Tasks counts the actor's named goroutines and timers (supervisors.Tasks).
	Tasks      map[string]int `json:"tasks,omitempty"`
	Children   []NodeInfo     `json:"children,omitempty"`
	ChildPaths []string       `json:"-"` // filled by the actor, expanded by the walker
	// OmittedChildren is how many children a bounded rendering (the debug event
	// stream's tree) left out; the full tree is GET /debug/actors.
	OmittedChildren int `json:"omitted_children,omitempty"`
}

// Crash makes the receiving actor panic (debug.chaos only): the supervision tree's
// restart path, exercised on demand.
type Crash struct{}
