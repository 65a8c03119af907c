package api

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

// decodeBody reads one JSON object from the (already size-capped and authenticated)
// body and returns the body's bytes. Unknown fields are ignored, as the contract
// says; trailing data is not.
func decodeBody(r *http.Request, into any) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, messages.Refuse(messages.ErrBadRequest, "request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(into); err != nil {
		return nil, messages.Refuse(messages.ErrBadRequest, "malformed JSON body")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return nil, messages.Refuse(messages.ErrBadRequest, "malformed JSON body: trailing data")
	}
	return body, nil
}

// decodeLeaseRequest decodes a body whose lease_uuid (read through lease after
// decoding) must be canonical, answering the 400 itself when it is not.
func decodeLeaseRequest(w http.ResponseWriter, r *http.Request, into any, lease *string) bool {
	if _, err := decodeBody(r, into); err != nil {
		writeError(w, err)
		return false
	}
	if !messages.ValidLeaseID(*lease) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
		return false
	}
	return true
}

// ask asks the registry, within the request's life.
func ask[R any](s *server, r *http.Request, timeout time.Duration, build func(chan<- R) any) (R, error) {
	return supervisors.Ask(r.Context(), s.d.Tree, s.d.RegistryPath, timeout, build)
}

// settleAfterTaken is how long a request its actor took is still awaited after
// the ask's own timeout (the actor journals and answers it in the same turn).
const settleAfterTaken = 30 * time.Second

// command asks the registry for a request that changes state: one not taken
// before timeout is refused and never takes effect (supervisors.AskTicketed).
func command(s *server, r *http.Request, timeout, settle time.Duration, build func(chan<- error, *messages.Ticket) any) error {
	refusal, err := supervisors.AskTicketed(r.Context(), s.d.Tree, s.d.RegistryPath, timeout, settle, build)
	return cmp.Or(err, refusal)
}

// answer writes an actor's reply: err (callers pass the ask's error, else the
// reply's own: cmp.Or(askErr, rep.Err)), else status with v.
func answer(w http.ResponseWriter, status int, err error, v any) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, v)
}

func (s *server) provision(w http.ResponseWriter, r *http.Request) {
	var req messages.ProvisionRequest
	if _, err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	err := command(s, r, s.d.AskTimeout, settleAfterTaken, func(c chan<- error, tk *messages.Ticket) any {
		return &messages.Admit{Req: req, Reply: c, Ticket: tk}
	})
	answer(w, http.StatusAccepted, err, map[string]string{"provision_id": req.LeaseUUID})
}

func (s *server) deprovision(w http.ResponseWriter, r *http.Request) {
	var req messages.DeprovisionRequest
	if !decodeLeaseRequest(w, r, &req, &req.LeaseUUID) {
		return
	}
	// A close is answered when its lease closed, or after CloseWait: 200 when its
	// intent is journaled and teardown is under way (a workload ignoring SIGTERM
	// takes container_stop_timeout; the deprovisioned callback tells when it is
	// done, and fred v0.13's client counts every 503 against its breaker); 503
	// lifecycle_pending when the lease says teardown is held (a busy volume, an
	// unproven volume root) or the intent is not journaled yet. One never taken is
	// refused as busy and never happens.
	durable := make(chan struct{}, 1)
	refusal, err := supervisors.AskTicketed(r.Context(), s.d.Tree, s.d.RegistryPath, s.d.CloseWait, 0,
		func(c chan<- error, tk *messages.Ticket) any {
			return &messages.Deprovision{Lease: req.LeaseUUID, Reply: c, Ticket: tk, Durable: durable}
		})
	if errors.Is(err, messages.ErrLifecyclePending) && len(durable) > 0 {
		err = nil // taken, journaled and progressing: the close is as good as done
	}
	answer(w, http.StatusOK, cmp.Or(err, refusal), map[string]string{"status": "ok"})
}

// withLease hands h the {lease} path value; a non-canonical one is simply not found.
func withLease(h func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("lease")
		if !messages.ValidLeaseID(id) {
			writeError(w, messages.Refuse(messages.ErrNotFound, "lease not found"))
			return
		}
		h(w, r, id)
	}
}

func (s *server) info(w http.ResponseWriter, r *http.Request, id string) {
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.InfoReply) any { return &messages.GetInfo{Lease: id, Reply: c} })
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Info)
}

func (s *server) logs(w http.ResponseWriter, r *http.Request, id string) {
	tail := 100
	if v := r.URL.Query().Get("tail"); v != "" || r.URL.Query().Has("tail") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, messages.Refuse(messages.ErrBadRequest, "tail must be an integer from 1 to 10000"))
			return
		}
		tail = n
	}
	// One log response at a time (up to 16 MiB each, read whole into memory):
	// a request queues for its turn, then is refused 503 with Retry-After: 1 —
	// the seed's admission, with a queue so that a few readers at once are
	// served rather than counted against fred v0.13's circuit breaker.
	wait := time.NewTimer(cmp.Or(s.d.LogsWait, DefaultLogsWait))
	defer wait.Stop()
	select {
	case s.logSlot <- struct{}{}:
		defer func() { <-s.logSlot }()
	case <-wait.C:
		writeError(w, messages.Refuse(messages.ErrBusy, "another log response is being served, retry shortly"))
		return
	case <-r.Context().Done():
		return
	}
	rep, err := ask(s, r, 2*s.d.AskTimeout+30*time.Second, func(c chan<- messages.LogsReply) any {
		return &messages.GetLogs{Lease: id, Tail: tail, Reply: c}
	})
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Logs)
}

// paging parses limit and continue per CONTRACT.md: limit a non-negative integer
// (0 = all, above 5000 clamped), continue a canonical UUID and only with a positive
// limit.
func paging(r *http.Request) (limit int, cont string, err error) {
	q := r.URL.Query()
	if q.Has("limit") {
		limit, err = strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 0 {
			return 0, "", messages.Refuse(messages.ErrBadRequest, "limit must be a non-negative integer")
		}
		limit = min(limit, 5000)
	}
	if q.Has("continue") {
		cont = q.Get("continue")
		if !messages.ValidLeaseID(cont) {
			return 0, "", messages.Refuse(messages.ErrBadRequest, "continue must be a lease UUID")
		}
		if limit <= 0 {
			return 0, "", messages.Refuse(messages.ErrBadRequest, "continue requires a positive limit")
		}
	}
	return limit, cont, nil
}

func (s *server) provisions(w http.ResponseWriter, r *http.Request) {
	limit, cont, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ids := r.URL.Query()["lease_uuid"]
	if len(ids) > 100 {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "at most 100 lease_uuid values"))
		return
	}
	if slices.ContainsFunc(ids, func(id string) bool { return !messages.ValidLeaseID(id) }) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
		return
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.ProvisionsReply) any {
		return &messages.ListProvisions{Leases: ids, Limit: limit, Continue: cont, Reply: c}
	})
	type page struct {
		Provisions []messages.ProvisionInfo `json:"provisions"`
		Continue   string                   `json:"continue,omitempty"`
	}
	answer(w, http.StatusOK, err, page{Provisions: rep.Provisions, Continue: rep.Continue})
}

func (s *server) provisionOne(w http.ResponseWriter, r *http.Request, id string) {
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.ProvisionReply) any {
		return &messages.GetProvision{Lease: id, Reply: c}
	})
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Info)
}

// retentions lists retained leases. This berthd never retains volumes on close
// (retain_on_close is not supported), so the list is truthfully empty; the paging
// parameters are still validated as the contract requires.
func (s *server) retentions(w http.ResponseWriter, r *http.Request) {
	limit, cont, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.RetentionsReply) any {
		return &messages.ListRetentions{Limit: limit, Continue: cont, Reply: c}
	})
	type page struct {
		Retentions []messages.Retention `json:"retentions"` // never null
		Continue   string               `json:"continue,omitempty"`
	}
	if rep.Retentions == nil {
		rep.Retentions = []messages.Retention{}
	}
	answer(w, http.StatusOK, err, page{Retentions: rep.Retentions, Continue: rep.Continue})
}

// reconcileCustomDomain is POST /reconcile_custom_domain: the registry checks
// the items against the lease and the other leases' domains, and the lease
// decides the drift. 204: nothing to do, or the change is admitted. A busy
// registry is the contract's coded 503: providerd asks again next tick.
func (s *server) reconcileCustomDomain(w http.ResponseWriter, r *http.Request) {
	var req messages.ReconcileCustomDomainRequest
	if !decodeLeaseRequest(w, r, &req, &req.LeaseUUID) {
		return
	}
	refusal, err := ask(s, r, s.d.AskTimeout, func(c chan<- error) any {
		return &messages.ReconcileDomains{Lease: req.LeaseUUID, Items: req.Items, Reply: c}
	})
	if errors.Is(err, messages.ErrBusy) {
		err = messages.Refuse(messages.ErrLifecyclePending, "busy, retry later")
	}
	if err = cmp.Or(err, refusal); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.StatsReply) any { return &messages.GetStats{Reply: c} })
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Stats)
}

// health is 200 only when the registry reports itself ready (startup recovery
// finished, accounting whole, its store healthy), the watcher reports Docker
// reachable, diagnostics.db passes its probe and the volume root is proven
// (CheckHealth).
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	v := CheckHealth(r.Context(), s.d.Tree, s.d.RegistryPath, s.d.WatcherPath, s.d.Diagnostics, s.d.VolumeRoot, cmp.Or(s.d.HealthTimeout, s.d.AskTimeout))
	if v.RegistryErr != nil {
		s.d.Log.Warn().Err(v.RegistryErr).Msg("health: registry")
	}
	if v.WatcherErr != nil {
		s.d.Log.Warn().Err(v.WatcherErr).Msg("health: watcher")
	}
	if v.DiagnosticsErr != nil {
		s.d.Log.Warn().Err(v.DiagnosticsErr).Msg("health: diagnostics.db")
	}
	if v.Reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "error": clip(v.Reason)})
		return
	}
	type healthy struct {
		Status string   `json:"status"`
		Detail []string `json:"detail,omitempty"`
	}
	writeJSON(w, http.StatusOK, healthy{Status: "healthy", Detail: v.Detail})
}

// restore is POST /restore: the registry admits it against the source's
// retention record (202 {"status":"restoring"}). Nothing retained that this
// tenant may claim is the contract's bare 422; a source already being restored a
// bare 409; a demote its data does not fit 422 demote_exceeds_tier.
func (s *server) restore(w http.ResponseWriter, r *http.Request) {
	var req messages.RestoreRequest
	if !decodeLeaseRequest(w, r, &req, &req.LeaseUUID) {
		return
	}
	if !messages.ValidLeaseID(req.FromLeaseUUID) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "from_lease_uuid must be a canonical UUID"))
		return
	}
	err := command(s, r, s.d.AskTimeout, settleAfterTaken, func(c chan<- error, tk *messages.Ticket) any {
		return &messages.Restore{Req: req, Reply: c, Ticket: tk}
	})
	switch {
	case errors.Is(err, messages.ErrNotRetained):
		w.WriteHeader(http.StatusUnprocessableEntity) // bare: nothing retained
	case errors.Is(err, messages.ErrInvalidState):
		w.WriteHeader(http.StatusConflict) // bare: the source is being restored
	default:
		answer(w, http.StatusAccepted, err, map[string]string{"status": "restoring"})
	}
}

// maintain is POST /restart and POST /update: validate, settle the maintenance
// identity, and ask the registry to journal the intent; nil means 202.
func (s *server) maintain(kind string) http.HandlerFunc {
	accepted := map[string]string{"status": messages.StatusRestarting}
	if kind == messages.MaintenanceUpdate {
		accepted = map[string]string{"status": messages.StatusUpdating}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		admitted := s.now().UTC() // the receipt time, unless Fred stamped one
		var req messages.MaintenanceRequest
		body, err := decodeBody(r, &req)
		if err == nil {
			err = s.checkMaintenance(kind, req)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		id := req.MaintenanceID
		if id == "" {
			id = DeriveMaintenanceID(req.LeaseUUID, r.Header.Get(callback.Header), body)
		}
		if req.MaintenanceAdmittedAt != "" {
			admitted, _ = time.Parse(time.RFC3339Nano, req.MaintenanceAdmittedAt) // checked above
			admitted = admitted.UTC()
		}
		err = command(s, r, s.d.AskTimeout, settleAfterTaken, func(c chan<- error, tk *messages.Ticket) any {
			return &messages.Maintain{Kind: kind, Req: req, MaintenanceID: id, AdmittedAt: admitted, Reply: c, Ticket: tk}
		})
		answer(w, http.StatusAccepted, err, accepted)
	}
}

// checkMaintenance is the facade's part of validating a maintenance request; the
// manifest and the lease's state are the registry's.
func (s *server) checkMaintenance(kind string, req messages.MaintenanceRequest) error {
	if !messages.ValidLeaseID(req.LeaseUUID) {
		return messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID")
	}
	if kind == messages.MaintenanceUpdate && req.Payload == "" {
		return messages.Refuse(messages.ErrBadRequest, "payload is required")
	}
	if req.CallbackURL != "" {
		if err := s.d.Callbacks.CheckURLField("callback_url", req.CallbackURL); err != nil {
			return err
		}
	}
	if req.MaintenanceID != "" && !canonicalUUIDv4.MatchString(req.MaintenanceID) {
		return messages.Refuse(messages.ErrBadRequest, "maintenance_id must be a canonical lower-case UUIDv4")
	}
	if req.MaintenanceAdmittedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, req.MaintenanceAdmittedAt); err != nil {
			return messages.Refuse(messages.ErrBadRequest, "maintenance_admitted_at must be an RFC 3339 time")
		}
	}
	return nil
}

var canonicalUUIDv4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// maintenanceIDDomain separates these digests from every other use of sha256.
const maintenanceIDDomain = "berth/maintenance_id/v1"

// DeriveMaintenanceID is the maintenance ID of a request that carries none: a
// UUIDv4-shaped value (version and variant bits set) from
// sha256(domain \n lease \n X-Fred-Signature \n hex(sha256(body))). A signature
// covers the method, path, body and a timestamp, so a byte-identical retry of one
// signed request derives the same ID, and any other request a different one.
func DeriveMaintenanceID(lease, signature string, body []byte) string {
	bodySum := sha256.Sum256(body)
	h := sha256.New()
	for _, part := range []string{maintenanceIDDomain, lease, signature} {
		h.Write([]byte(part))
		h.Write([]byte{'\n'})
	}
	h.Write([]byte(hex.EncodeToString(bodySum[:])))
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id.String()
}

// releases is a lease's release history, oldest first: always a JSON array.
func (s *server) releases(w http.ResponseWriter, r *http.Request, id string) {
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.ReleasesReply) any {
		return &messages.GetReleases{Lease: id, Reply: c}
	})
	if rep.Releases == nil {
		rep.Releases = []messages.Release{}
	}
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Releases)
}

func (s *server) now() time.Time {
	if s.d.Now != nil {
		return s.d.Now()
	}
	return time.Now()
}

// clip bounds an actor-supplied reason like every other error text.
func clip(s string) string {
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return strings.ToValidUTF8(s, "?")
}

// cleanup is one fresh observation of what Docker holds of a lease: 200 with
// state unknown and complete false when Docker or the registry could not be
// read (an observation, never an error that reads as "gone").
func (s *server) cleanup(w http.ResponseWriter, r *http.Request, id string) {
	rep, err := supervisors.Ask(r.Context(), s.d.Tree, s.d.CleanupPath, 2*s.d.AskTimeout, func(c chan<- messages.CleanupReply) any {
		return &messages.GetCleanup{Lease: id, Reply: c}
	})
	answer(w, http.StatusOK, cmp.Or(err, rep.Err), rep.Observation)
}
