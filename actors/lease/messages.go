package lease

// Commands the registry sends a lease actor beside the shared vocabulary of
// package messages (Deprovision, GetInfo, Inventory, ContainerDied, …), and the
// actor's messages to itself.

import "github.com/berth-dev/berth/messages"

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
	Ticket   *messages.Ticket // taken as the maintenance is decided
}

// CloseDropped tells the registry a forwarded deprovision was refused: its
// asker had given up before the lease could journal the close intent.
type CloseDropped struct{ Lease string }

// The actor's messages to itself, sent by its Tasks (a restarted actor never
// sees its predecessor's). A worker's result names its worker: one canceled or
// superseded since is ignored; so is a Wait's timer once canceled or replaced.
type (
	workerDone struct {
		w       *worker
		in      Input
		release func() // the worker's image hold (worker.go holdImages)
	}
	waiting struct {
		timer  Timer
		cancel func()
	}
)
