package registry

import "github.com/berth-dev/berth/messages"

// imagePins are the images the registry's durable state pins: every live
// lease's release history (what its actor last reported from its journal) and
// every retention record's images (a restore, or a claimed record's
// destination, runs exactly those). Nothing is stored for them: each pin is
// derived from the journaled state that needs it, so pins cannot drift from it.
// A live lease whose actor has not reported since this registry started (or
// since its admission) is counted Unknown: its pins are not known yet.
func (d *Directory) imagePins() messages.ImagePins {
	out := messages.ImagePins{IDs: map[string]struct{}{}, Ready: d.Ready}
	for id, spec := range d.St.Leases {
		for _, si := range spec.Images {
			out.Add(si.ID)
		}
		e := d.entries[id]
		if e == nil || e.report.Lease == "" {
			out.Unknown++
			continue
		}
		for _, img := range e.report.Images {
			out.Add(img)
		}
	}
	for _, r := range d.St.Retentions {
		for _, si := range r.Record.Images {
			out.Add(si.ID)
		}
	}
	return out
}
