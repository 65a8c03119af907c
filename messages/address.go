package messages

// Address is where an actor of the tree lives: its PID id, which protoactor
// keeps across restarts. The tree's layout is fixed (cmd/berthd/tree.go spawns
// these children of the root in this order), so an actor reaches a sibling by
// its Address, never by a path string built on the spot.
type Address string

// The root and its children.
const (
	Root       Address = "root"
	Registry   Address = "root/registry"
	Outbox     Address = "root/outbox"
	Watcher    Address = "root/watcher"
	Reconciler Address = "root/reconciler"
	Reclaimer  Address = "root/reclaimer"
	Netpool    Address = "root/netpool"
	VolumeHold Address = "root/volumehold"
	Reaper     Address = "root/reaper"
	Refresh    Address = "root/refresh"
	ImageGC    Address = "root/imagegc"
	Facade     Address = "root/facade"
)

// Child is the address of a's child named name.
func (a Address) Child(name string) Address { return a + "/" + Address(name) }
