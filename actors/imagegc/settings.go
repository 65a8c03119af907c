package imagegc

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the image collector.
type Settings struct {
	Interval     time.Duration // image_gc_interval
	BudgetBytes  int64         // image_store_budget_mb
	MinFreeBytes int64         // image_store_min_free_mb (0: no floor)
	PassTimeout  time.Duration
	AskTimeout   time.Duration // the registry's answer with its pins
	RemoveWait   time.Duration // one removal
	RegistryPath messages.Address
}

// DefaultSettings are the collector's fixed settings.
func DefaultSettings() Settings {
	return Settings{Interval: 5 * time.Minute, PassTimeout: 10 * time.Minute, AskTimeout: 10 * time.Second,
		RemoveWait: time.Minute, RegistryPath: messages.Registry}
}

// Docker is what the collector asks of the Engine API.
type Docker interface {
	StoreImages(ctx context.Context) ([]dockerio.StoredImage, error)
	ImagesInUse(ctx context.Context) (map[string]int, error)
	RemoveImageRef(ctx context.Context, ref string) error
	DataRootSpace(ctx context.Context) (free, total uint64, err error)
}

// Deps are the collector's collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Docker   Docker               // nil: an engine without an image store; the collector only records
	Holds    *dockerio.ImageHolds // the admissions in flight
	Settings *Settings
	Metrics  *Metrics
	// Pins answers the registry's pins (nil: asked of the registry at
	// Settings.RegistryPath; a test answers them itself).
	Pins func(ctx context.Context) (messages.ImagePins, error)
}
