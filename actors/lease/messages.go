package lease

import (
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Messages between the registry and its lease actors, and a lease actor's own.

// Reprovision tells a failed lease that the registry admitted a new Spec for it
// (already stored in the shared spec pointer): start provisioning it.
type Reprovision struct{}

// Report is what a lease tells the registry after (re)starting and after every
// transition: the registry keeps it as its read model for GET /provisions and
// /stats, and to decide admissions without asking.
type Report struct {
	Lease     string
	Admission uint64
	Status    Status
	Info      messages.ProvisionInfo
	Running   int // containers believed running (ready cohort size)
}

// LeaseClosed tells the registry the lease's closed receipt is journaled: release the
// pool and stop the actor.
type LeaseClosed struct {
	Lease     string
	Admission uint64
}

// Inventory hands a lease the managed containers Docker lists for it (startup and
// periodic reconciliation). Complete is false when the list may have missed some.
type Inventory struct {
	Containers []dockerio.Container
	Reply      chan<- struct{} // closed once the lease has acted on it (nil = no ack)
}

// ContainerDied is a death the watcher saw on Docker's live event stream.
type ContainerDied struct {
	ContainerID string
	Generation  uint64
	ExitCode    int
	// Counted: the stream saw this run start and saw no kill before the death.
	Counted bool
}

// Worker completions carry the epoch of the worker that produced them; a message
// whose epoch is not the current worker's is from a canceled or previous worker
// (possibly of a previous incarnation of the actor) and is ignored.
type (
	provisionDone struct {
		epoch      uint64
		generation uint64
		out        outcome
	}
	teardownDone struct {
		epoch uint64
		err   error
	}
	failureCaptured struct {
		epoch uint64
	}
	retry struct {
		epoch uint64
		what  string
	}
)

// outcome is the result of a provision or resume worker.
type outcome struct {
	ok         bool
	pending    bool // cannot decide yet (resume before the deadline): look again later
	canceled   bool
	cleaned    bool // a failure whose diagnostics are captured and containers removed
	containers []Instance
	reason     string
	message    string
}
