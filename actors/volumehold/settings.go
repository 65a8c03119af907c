package volumehold

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the hold actor.
type Settings struct {
	RegistryPath messages.Address
	BackoffBase  time.Duration // 1 s
	BackoffCap   time.Duration // 1 min
}

// DefaultSettings are the hold actor's: retries back off 1 s → 1 min.
func DefaultSettings() Settings {
	return Settings{RegistryPath: messages.Registry, BackoffBase: time.Second, BackoffCap: time.Minute}
}

// Deps are its collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Volumes  dockerio.Volumes
	Settings *Settings
	Metrics  *Metrics
}
