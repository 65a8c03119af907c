package imagegc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/supervisors"
)

// Metrics of the image store and its collection (berth_image_*).
type Metrics struct {
	pinned, images, storeBytes, budget prometheus.Gauge
	collected, collectedBytes          prometheus.Counter
	inhibited, passes                  *prometheus.CounterVec
}

// NewMetrics registers the collector's series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := supervisors.NewSeries(reg)
	return &Metrics{
		pinned: s.Gauge("berth_image_pins",
			"Images the registry's state pins (live leases' releases, retention records), at the last collection pass."),
		images: s.Gauge("berth_image_store_images",
			"Images of this installation (pulled by berthd) in Docker's store, at the last pass."),
		storeBytes: s.Gauge("berth_image_store_bytes",
			"Bytes of this installation's images in Docker's store (image_store_budget_mb bounds them), at the last pass."),
		budget: s.Gauge("berth_image_store_budget_bytes",
			"image_store_budget_mb in bytes: above it the collector removes images no pin needs, oldest first."),
		collected: s.Counter("berth_images_collected_total", "Images of this installation the collector removed."),
		collectedBytes: s.Counter("berth_image_collected_bytes_total",
			"Bytes of the images the collector removed (Docker's image size: shared layers may free less)."),
		inhibited: s.Counters("berth_image_collections_inhibited_total",
			"Images the collector left although the store was over its budget or the disk below its floor, by reason.",
			"reason", InhibitPinsUnknown, InhibitPinned, InhibitInUse, InhibitForeign, InhibitHeld),
		passes: s.Counters("berth_image_collection_passes_total",
			"Collection passes, by outcome (ok, error).", "outcome", "ok", "error"),
	}
}
