package lease

import (
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// DefaultSettings are a lease actor's fixed settings: health polled every 2 s,
// undecidable work looked at again every 5 s, a failed attempt's kept
// containers cleaned up again after 2 s doubling to 2 min, a snapshot every 64
// events, a 32 MiB release history, seeds of at most one entry per KiB (the
// config's default); the timeouts and hardening come from the config.
func DefaultSettings() Settings {
	return Settings{HealthPoll: 2 * time.Second, ResumePoll: 5 * time.Second, TeardownRetry: 5 * time.Second,
		OutboxPath: messages.Outbox, VolumeHoldPath: messages.VolumeHold, SnapshotEvery: 64, HistoryBytes: 32 << 20,
		MinAvgFileBytes: 1024, CleanupRetry: supervisors.Retry{Base: 2 * time.Second, Cap: 2 * time.Minute}}
}
