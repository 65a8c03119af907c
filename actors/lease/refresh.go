package lease

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/berth-dev/berth/messages"
)

// RefreshReceipt is how the lease's runtime_refresh maintenance id stands: not
// found (never admitted), in flight, or settled — refreshed once its target
// became active, else failed, with the release a rollback left running and
// ready.
func RefreshReceipt(st *State, id string) messages.RefreshReceipt {
	rec := messages.RefreshReceipt{Read: true}
	var target *Release
	for i := range st.Releases {
		if st.Releases[i].MaintenanceID == id {
			target = &st.Releases[i]
		}
	}
	if target == nil {
		return rec
	}
	rec.Found = true
	if st.Maintenance != nil && st.Maintenance.ID == id {
		return rec
	}
	rec.Settled, rec.Outcome = true, messages.RefreshFailed
	if target.Status == messages.ReleaseActive || target.Status == messages.ReleaseSuperseded {
		rec.Outcome = messages.RefreshRefreshed
		return rec
	}
	if a := st.Active(); a != nil && st.Status == Ready {
		sum := sha256.Sum256(a.Manifest)
		rec.Restored = &messages.RestoredRelease{ReleaseVersion: a.Version, ReleaseDigest: hex.EncodeToString(sum[:])}
	}
	return rec
}
