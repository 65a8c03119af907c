package lease

// Commands the registry sends a lease actor beside the shared vocabulary of
// package messages (Deprovision, GetInfo, Inventory, ContainerDied, …), and the
// actor's messages to itself.

// ReprovisionCommand is the registry's Reprovision (an Input, inputs.go): it
// admitted Spec for this failed lease. The lease keeps the spec, and so does its
// producer, before deciding (spec.go: latest).
type ReprovisionCommand struct{ Spec *Spec }

// MaintainCommand is a restart or update the registry validated (for an update:
// the target release with the new manifest and the lease's frozen profiles). A nil
// Reply error means the intent is journaled: 202.
type MaintainCommand struct {
	Maintain Maintain
	Reply    chan<- error
}

// The actor's messages to itself. A worker's completion carries the epoch of the
// worker that produced it: a completion whose epoch is not the current worker's is
// from a canceled or previous worker (possibly of a previous incarnation of the
// actor) and is ignored.
type (
	workerDone struct {
		epoch uint64
		in    Input
	}
	timerFired struct {
		token uint64
		what  string
	}
	sideDone struct{ in Input }
)
