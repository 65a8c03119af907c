package imagegc

import (
	"cmp"
	"slices"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Reasons an image of the installation is left although the store is over its
// budget or the disk below its floor (berth_image_collections_inhibited_total).
const (
	InhibitPinsUnknown = "pins_unknown" // the registry's pins are not whole yet: nothing is removed
	InhibitPinned      = "pinned"       // a live lease's release or a retention record needs it
	InhibitInUse       = "in_use"       // a container (of any installation or owner) uses it
	InhibitForeign     = "foreign_refs" // someone else tagged or pulled it under another name
	InhibitHeld        = "held"         // an admission in flight holds it (at removal time)
)

// Input is what one collection decides on.
type Input struct {
	Owned map[string]*Owned      // this installation's images, by ID
	Store []dockerio.StoredImage // Docker's store, as listed
	InUse map[string]int         // containers by image ID
	Pins  messages.ImagePins
	// BudgetBytes bounds the installation's image store (image_store_budget_mb).
	BudgetBytes int64
	// MinFreeBytes is the floor of free space on Docker's data root
	// (image_store_min_free_mb; 0: no floor); FreeBytes the free space now
	// (negative: unknown, the floor is not applied).
	MinFreeBytes, FreeBytes int64
}

// Removal is one image to remove, by the references it was pulled by.
type Removal struct {
	ID    string
	Refs  []string
	Bytes int64
}

// Plan is a collection's decision.
type Plan struct {
	StoreBytes int64 // bytes of the installation's images in the store
	Images     int   // the installation's images in the store
	Pinned     int   // of which pinned
	Excess     int64 // bytes to free (0: within budget and above the floor)
	Remove     []Removal
	Inhibited  map[string]int // images left although over, by reason
	Gone       []string       // recorded images no longer in the store: forgotten
}

// Decide chooses which of the installation's images to remove: nothing unless
// the installation's store is over its budget or the data root's free space is
// below its floor; then the oldest pulled first, skipping any image a pin
// needs, a container uses or another name holds (a tag, a digest of a
// repository it was not pulled by), until the excess is freed. Nothing at all
// while the pins are not whole. Images not of this installation are never
// considered.
func Decide(in Input) Plan {
	p := Plan{Inhibited: map[string]int{}}
	var ours []dockerio.StoredImage
	seen := map[string]bool{}
	for _, img := range in.Store {
		if in.Owned[img.ID] == nil || seen[img.ID] {
			continue
		}
		seen[img.ID] = true
		ours = append(ours, img)
		p.StoreBytes += img.Size
		if _, ok := in.Pins.IDs[img.ID]; ok {
			p.Pinned++
		}
	}
	p.Images = len(ours)
	for id := range in.Owned {
		if !seen[id] {
			p.Gone = append(p.Gone, id)
		}
	}
	slices.Sort(p.Gone)
	p.Excess = max(p.StoreBytes-in.BudgetBytes, 0)
	if in.MinFreeBytes > 0 && in.FreeBytes >= 0 && in.FreeBytes < in.MinFreeBytes {
		p.Excess = max(p.Excess, in.MinFreeBytes-in.FreeBytes)
	}
	if p.Excess == 0 {
		return p
	}
	if !in.Pins.Ready || in.Pins.Unknown > 0 {
		p.Inhibited[InhibitPinsUnknown]++
		return p
	}
	slices.SortFunc(ours, func(a, b dockerio.StoredImage) int {
		return cmp.Or(in.Owned[a.ID].PulledAt.Compare(in.Owned[b.ID].PulledAt), cmp.Compare(a.ID, b.ID))
	})
	left := p.Excess
	for _, img := range ours {
		if left <= 0 {
			break
		}
		if why := inhibited(in, img); why != "" {
			p.Inhibited[why]++
			continue
		}
		p.Remove = append(p.Remove, Removal{ID: img.ID, Refs: slices.Clone(img.RepoDigests), Bytes: img.Size})
		left -= img.Size
	}
	return p
}

// inhibited is why img may not be removed ("": it may).
func inhibited(in Input, img dockerio.StoredImage) string {
	if _, ok := in.Pins.IDs[img.ID]; ok {
		return InhibitPinned
	}
	if in.InUse[img.ID] > 0 {
		return InhibitInUse
	}
	// berthd pulls by digest and never tags: a tag, a digest it did not pull by,
	// or no name at all is someone else's doing.
	if len(img.RepoTags) > 0 || len(img.RepoDigests) == 0 {
		return InhibitForeign
	}
	for _, ref := range img.RepoDigests {
		if !slices.Contains(in.Owned[img.ID].Refs, ref) {
			return InhibitForeign
		}
	}
	return ""
}
