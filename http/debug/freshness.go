package debug

import (
	"context"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Freshness bounds, in multiples of a pass's interval. A pass runs every
// interval, so its last one is normally younger than that; one late or failed
// pass makes it stale, and beyond unknownAfter nothing is known of it any more
// (the actor may be wedged, or is not passing at all) — the bound crewship's
// cleanup observations use.
const (
	freshWithin  = 2
	unknownAfter = 3
)

// passAskTimeout bounds each background actor's answer.
const passAskTimeout = time.Second

// freshness is GET /debug/freshness: {"passes": [Freshness…]}, in PassPaths order.
func (s *server) freshness(w http.ResponseWriter, r *http.Request) {
	now := s.opts.Now()
	out := make([]messages.Freshness, len(s.opts.PassPaths))
	var wg sync.WaitGroup
	for i, p := range s.opts.PassPaths {
		wg.Go(func() { out[i] = s.passFreshness(r.Context(), p, now) })
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, struct {
		Passes []messages.Freshness `json:"passes"`
	}{out})
}

func (s *server) passFreshness(ctx context.Context, actorPath messages.Address, now time.Time) messages.Freshness {
	rep, err := supervisors.Ask(ctx, s.tree, actorPath, passAskTimeout, func(c chan<- messages.PassReport) any {
		return &messages.GetPass{Reply: c}
	})
	if err != nil {
		return messages.Freshness{Name: path.Base(string(actorPath)), Outcome: "error: " + err.Error(), Status: messages.FreshnessUnknown}
	}
	return Freshness(rep, now)
}

// Freshness judges a background actor's last pass at now:
//   - unknown: no pass finished yet (since the actor last started), or the last
//     one is older than unknownAfter × its interval;
//   - stale: the last pass failed, or it is older than freshWithin × its interval;
//   - fresh: otherwise.
func Freshness(p messages.PassReport, now time.Time) messages.Freshness {
	f := messages.Freshness{Name: p.Name, IntervalSeconds: p.Interval.Seconds(), Passes: p.Passes, Running: p.Running,
		Detail: p.Detail, Outcome: "none", Status: messages.FreshnessUnknown}
	if p.LastAt.IsZero() {
		return f
	}
	at := p.LastAt
	age := now.Sub(at)
	f.LastPassAt, f.AgeSeconds, f.DurationSeconds = &at, seconds(age), p.Duration.Seconds()
	f.Outcome = "ok"
	if p.Err != "" {
		f.Outcome = "error: " + p.Err
	}
	switch {
	case p.Interval > 0 && age > unknownAfter*p.Interval:
		f.Status = messages.FreshnessUnknown
	case p.Err != "", p.Interval > 0 && age > freshWithin*p.Interval:
		f.Status = messages.FreshnessStale
	default:
		f.Status = messages.FreshnessFresh
	}
	return f
}
