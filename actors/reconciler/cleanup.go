package reconciler

import (
	"context"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// observeCleanup is one fresh observation of what Docker holds of a lease
// (GET /cleanup/{lease}): taken when asked, so it is never older than the
// request, and complete only when the registry and Docker both answered. The
// listing comes first and liveness after (as the reclaimer's fence): a lease
// whose objects were listed was admitted before, so the answer is not_closed
// rather than a closed lease's pending.
func (a *Actor) observeCleanup(ctx context.Context, lease string) messages.CleanupReply {
	obs := messages.CleanupObservation{LeaseUUID: lease, Scope: "containers,networks", State: messages.CleanupUnknown,
		ObservedAt: a.Now().UTC().Round(time.Millisecond), Remaining: []string{}}
	ctx, cancel := context.WithTimeout(ctx, a.Settings.AckTimeout)
	defer cancel()
	r, err := a.Engine.LeaseResidue(ctx, lease)
	if err != nil {
		a.Log.Warn().Err(err).Str("lease_uuid", lease).Msg("cleanup observation: Docker could not be read")
		obs.Error = "docker_unavailable"
		return messages.CleanupReply{Observation: obs}
	}
	obs.Remaining = append(append(obs.Remaining, r.Containers...), r.Networks...)
	obs.Unattributed = r.Unattributed
	isLive, err := supervisors.LiveLeases(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AckTimeout)
	live := isLive[lease]
	if err != nil {
		obs.Error = "registry_unavailable"
		return messages.CleanupReply{Observation: obs}
	}
	obs.Complete = true
	switch {
	case live:
		obs.State = messages.CleanupNotClosed
	case len(obs.Remaining) > 0:
		obs.State = messages.CleanupPending
	default:
		obs.State = messages.CleanupObservedClear
	}
	return messages.CleanupReply{Observation: obs}
}
