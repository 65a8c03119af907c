package debug

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

// leaseAskTimeout bounds each lease actor's answer when rows are filled in; one
// that is slower is shown without instances (instances_error) rather than holding
// the whole list up.
const leaseAskTimeout = time.Second

// leaseAskParallel bounds the lease actors asked at once.
const leaseAskParallel = 32

// statuses a ?status= filter may name: the wire statuses and the leases' own.
var statuses = []string{
	messages.StatusProvisioning, messages.StatusReady, messages.StatusFailing, messages.StatusFailed,
	messages.StatusUnknown, messages.StatusRestarting, messages.StatusUpdating, messages.StatusDeprovisioning,
	messages.StatusRetained, messages.LeaseStatusReserved, messages.LeaseStatusClosed,
}

// leases is GET /debug/leases?status=S&tenant=T: {"leases": [LeaseRow…]}, newest first.
func (s *server) leases(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(statuses, status) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "status must be one of %s", strings.Join(statuses, ", ")))
		return
	}
	rows, err := s.leaseRows(r.Context(), messages.DebugLeases{Status: status, Tenant: q.Get("tenant")})
	if err != nil {
		writeError(w, err)
		return
	}
	slices.SortFunc(rows, func(a, b messages.LeaseRow) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.LeaseUUID, b.LeaseUUID))
	})
	writeJSON(w, http.StatusOK, struct {
		Leases []messages.LeaseRow `json:"leases"`
	}{rows})
}

// leaseRows asks the registry for rows, then every row's lease actor for its
// instances (in parallel, bounded), and stamps their age.
func (s *server) leaseRows(ctx context.Context, q messages.DebugLeases) ([]messages.LeaseRow, error) {
	rep, err := ask(s, ctx, s.opts.RegistryPath, func(c chan<- messages.DebugLeasesReply) any {
		q.Reply = c
		return &q
	})
	if err != nil {
		return nil, fmt.Errorf("ask the registry: %w", err)
	}
	rows := rep.Rows
	if rows == nil {
		rows = []messages.LeaseRow{}
	}
	sem := make(chan struct{}, leaseAskParallel)
	var wg sync.WaitGroup
	for i := range rows {
		if rows[i].Actor != "" {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				s.fillInstances(ctx, &rows[i])
			})
		}
	}
	wg.Wait()
	now := s.opts.Now()
	for i := range rows {
		if !rows[i].CreatedAt.IsZero() {
			rows[i].AgeSeconds = seconds(now.Sub(rows[i].CreatedAt))
		}
	}
	return rows, nil
}

// fillInstances asks a row's lease actor for its services and instances.
func (s *server) fillInstances(ctx context.Context, row *messages.LeaseRow) {
	rep, err := supervisors.Ask(ctx, s.tree, messages.Address(row.Actor), leaseAskTimeout,
		func(c chan<- messages.DebugLeaseReply) any { return &messages.DebugLease{Reply: c} })
	if err != nil {
		row.InstancesError = "lease actor did not answer: " + err.Error()
		return
	}
	row.LeaseStatus = rep.LeaseStatus
	if rep.Services != nil {
		row.Services = rep.Services
	}
}

// leaseHistory is GET /debug/leases/{lease}: the lease's row, its journal
// summarised, its callbacks, releases and stored diagnostics, and its ingress. A lease is known
// while the registry has it, its stream exists (a closed lease keeps its closed
// receipt) or diagnostics of it are stored; otherwise 404.
func (s *server) leaseHistory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("lease")
	if !messages.ValidLeaseID(id) {
		writeError(w, messages.Refuse(messages.ErrNotFound, "lease not found"))
		return
	}
	if s.opts.Reads == nil {
		writeError(w, messages.Refuse(messages.ErrUnavailable, "no state store to read"))
		return
	}
	ctx := r.Context()
	rows, err := s.leaseRows(ctx, messages.DebugLeases{Lease: id})
	if err != nil {
		writeError(w, err)
		return
	}
	out, stored, err := s.opts.Reads.History(id)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case len(rows) > 0:
		out.Lease = rows[0]
	case !stored:
		writeError(w, messages.Refuse(messages.ErrNotFound, "lease not found"))
		return
	case !out.Lease.CreatedAt.IsZero():
		out.Lease.AgeSeconds = seconds(s.opts.Now().Sub(out.Lease.CreatedAt))
	}
	if out.Callbacks, err = s.callbacksOf(ctx, id); err != nil {
		writeError(w, err)
		return
	}
	out.Releases, out.ReleasesError = s.releasesOf(ctx, id)
	view := leaseView{LeaseHistory: out}
	view.Ingress, view.IngressError = s.ingressOf(ctx, id)
	writeJSON(w, http.StatusOK, view)
}

// callbacksOf is a lease's queued rows (from the store, with the attempts the
// outbox actor counted) followed by the deliveries it remembers.
func (s *server) callbacksOf(ctx context.Context, id string) ([]messages.DebugCallback, error) {
	rows, err := s.opts.Reads.Outbox(id)
	if err != nil {
		return nil, err
	}
	// Attempts are the outbox actor's; when it cannot answer the rows still show.
	book, _ := ask(s, ctx, s.opts.OutboxPath, func(c chan<- messages.DebugOutboxReply) any {
		return &messages.DebugOutbox{Lease: id, Reply: c}
	})
	out := make([]messages.DebugCallback, 0, len(rows)+len(book.Delivered))
	queued := make(map[string]bool, len(rows))
	for _, e := range rows {
		queued[e.DeliveryID] = true
		cb := messages.DebugCallback{DeliveryID: e.DeliveryID, Kind: e.Kind, Status: callback.Status(e.Body),
			URLPath: callback.URLPath(e.URL), CreatedAt: e.CreatedAt, State: messages.CallbackQueued}
		if t, ok := book.Attempts[e.DeliveryID]; ok {
			cb.Attempts, cb.LastError = t.Attempts, t.LastError
			cb.LastAttemptAt = timePtr(t.LastAttemptAt)
		}
		out = append(out, cb)
	}
	for _, d := range book.Delivered {
		if queued[d.DeliveryID] {
			continue // delivered but its row not yet deleted: still queued
		}
		out = append(out, messages.DebugCallback{DeliveryID: d.DeliveryID, Kind: d.Kind, Status: d.Status, URLPath: d.URLPath,
			CreatedAt: d.CreatedAt, State: cmp.Or(d.Dropped, messages.CallbackDelivered), Attempts: d.Attempts, LastError: d.LastError,
			LastAttemptAt: timePtr(d.LastAttemptAt), DeliveredAt: timePtr(d.DeliveredAt)})
	}
	slices.SortStableFunc(out, func(a, b messages.DebugCallback) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// releasesOf is GET /releases/{lease}'s list: empty for a lease with none
// (closed, or unknown to the registry), and why when it could not be read.
func (s *server) releasesOf(ctx context.Context, id string) ([]messages.Release, string) {
	rep, err := ask(s, ctx, s.opts.RegistryPath, func(c chan<- messages.ReleasesReply) any {
		return &messages.GetReleases{Lease: id, Reply: c}
	})
	switch err = cmp.Or(err, rep.Err); {
	case err != nil && !errors.Is(err, messages.ErrNotFound):
		return []messages.Release{}, err.Error()
	case err != nil || rep.Releases == nil:
		return []messages.Release{}, ""
	}
	return rep.Releases, ""
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
