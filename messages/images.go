package messages

// Image pins and the image collector (actors/imagegc).

// ImagePulled tells the image collector that this installation pulled an image
// that was absent before: its ID and the repo@digest it was pulled by. Only
// images recorded so are ever collected.
type ImagePulled struct {
	ID, Ref string
}

// GetImagePins asks the registry for the images its durable state pins: every
// live lease's releases (as each last reported them) and every retention
// record's (a restore runs them).
type GetImagePins struct {
	Reply chan<- ImagePins
}

// ImagePins answers GetImagePins. Unknown counts live leases whose pins the
// registry does not know yet (admitted, or replayed, and not reported since):
// while any is unknown, or before startup recovery finished (Ready false), the
// set is not whole and nothing may be collected.
type ImagePins struct {
	IDs     map[string]struct{}
	Ready   bool
	Unknown int
}

// CollectImagesNow asks the image collector for a pass now.
type CollectImagesNow struct{}

// Add pins id ("": none).
func (p *ImagePins) Add(id string) {
	if id != "" {
		p.IDs[id] = struct{}{}
	}
}
