package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// decode reads one JSON object from the (already size-capped and authenticated)
// body. Unknown fields are ignored, as the contract says; trailing data is not.
func decode(r *http.Request, into any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return messages.Refuse(messages.ErrBadRequest, "request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(into); err != nil {
		return messages.Refuse(messages.ErrBadRequest, "malformed JSON body")
	}
	if dec.More() {
		return messages.Refuse(messages.ErrBadRequest, "malformed JSON body: trailing data")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return messages.Refuse(messages.ErrBadRequest, "malformed JSON body: trailing data")
	}
	return nil
}

// decodeLeaseRequest decodes a body whose lease_uuid (read through lease after
// decoding) must be canonical, answering the 400 itself when it is not.
func decodeLeaseRequest(w http.ResponseWriter, r *http.Request, into any, lease *string) bool {
	if err := decode(r, into); err != nil {
		writeError(w, err)
		return false
	}
	if !registry.ValidLeaseID(*lease) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
		return false
	}
	return true
}

func ask[R any](s *server, r *http.Request, timeout time.Duration, build func(chan<- R) any) (R, error) {
	ctx, cancel := context.WithTimeout(r.Context(), timeout+time.Second)
	defer cancel()
	return supervisors.Ask(ctx, s.d.Tree, s.d.RegistryPath, timeout, build)
}

// answer writes an actor's reply: the ask's error, else the reply's own error,
// else 200 with v.
func answer(w http.ResponseWriter, askErr, replyErr error, v any) {
	if askErr == nil {
		askErr = replyErr
	}
	if askErr != nil {
		writeError(w, askErr)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *server) provision(w http.ResponseWriter, r *http.Request) {
	var req messages.ProvisionRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	err, askErr := ask(s, r, s.d.AskTimeout, func(c chan<- error) any { return &messages.Admit{Req: req, Reply: c} })
	if askErr != nil {
		writeError(w, askErr)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"provision_id": req.LeaseUUID})
}

func (s *server) deprovision(w http.ResponseWriter, r *http.Request) {
	var req messages.DeprovisionRequest
	if !decodeLeaseRequest(w, r, &req, &req.LeaseUUID) {
		return
	}
	err, askErr := ask(s, r, s.d.CloseWait, func(c chan<- error) any { return &messages.Deprovision{Lease: req.LeaseUUID, Reply: c} })
	if askErr != nil {
		if errors.Is(askErr, messages.ErrBusy) {
			// The close intent is journaled and teardown goes on; providerd retries.
			askErr = messages.Refuse(messages.ErrLifecyclePending, "close in progress, retry later")
		}
		writeError(w, askErr)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// pathLease is the {lease} path value; a non-canonical one is simply not found.
func pathLease(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("lease")
	if !registry.ValidLeaseID(id) {
		writeError(w, messages.Refuse(messages.ErrNotFound, "lease not found"))
		return "", false
	}
	return id, true
}

func (s *server) info(w http.ResponseWriter, r *http.Request) {
	id, ok := pathLease(w, r)
	if !ok {
		return
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.InfoReply) any { return &messages.GetInfo{Lease: id, Reply: c} })
	answer(w, err, rep.Err, rep.Info)
}

func (s *server) logs(w http.ResponseWriter, r *http.Request) {
	id, ok := pathLease(w, r)
	if !ok {
		return
	}
	tail := 100
	if v := r.URL.Query().Get("tail"); v != "" || r.URL.Query().Has("tail") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, messages.Refuse(messages.ErrBadRequest, "tail must be an integer from 1 to 10000"))
			return
		}
		tail = n
	}
	rep, err := ask(s, r, 2*s.d.AskTimeout+30*time.Second, func(c chan<- messages.LogsReply) any {
		return &messages.GetLogs{Lease: id, Tail: tail, Reply: c}
	})
	answer(w, err, rep.Err, rep.Logs)
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
		if !registry.ValidLeaseID(cont) {
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
	for _, id := range ids {
		if !registry.ValidLeaseID(id) {
			writeError(w, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
			return
		}
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.ProvisionsReply) any {
		return &messages.ListProvisions{Leases: ids, Limit: limit, Continue: cont, Reply: c}
	})
	if err != nil {
		writeError(w, err)
		return
	}
	type page struct {
		Provisions []messages.ProvisionInfo `json:"provisions"`
		Continue   string                   `json:"continue,omitempty"`
	}
	writeJSON(w, http.StatusOK, page{Provisions: rep.Provisions, Continue: rep.Continue})
}

func (s *server) provisionOne(w http.ResponseWriter, r *http.Request) {
	id, ok := pathLease(w, r)
	if !ok {
		return
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.ProvisionReply) any {
		return &messages.GetProvision{Lease: id, Reply: c}
	})
	answer(w, err, rep.Err, rep.Info)
}

// retentions lists retained leases. This berthd never retains volumes on close
// (retain_on_close is not supported), so the list is truthfully empty; the paging
// parameters are still validated as the contract requires.
func (s *server) retentions(w http.ResponseWriter, r *http.Request) {
	if _, _, err := paging(r); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]any{"retentions": {}})
}

// reconcileCustomDomain: ingress is not enabled in this berthd, so there is never
// anything to reconcile — the contract's cheap 204, after validating the body.
func (s *server) reconcileCustomDomain(w http.ResponseWriter, r *http.Request) {
	var req struct {
		LeaseUUID string               `json:"lease_uuid"`
		Items     []messages.LeaseItem `json:"items"`
	}
	if !decodeLeaseRequest(w, r, &req, &req.LeaseUUID) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.StatsReply) any { return &messages.GetStats{Reply: c} })
	answer(w, err, rep.Err, rep.Stats)
}

// health is 200 only when the store is readable with its latch clear, Docker
// answers, and the registry's accounting is whole (startup recovery finished).
func (s *server) health(w http.ResponseWriter, r *http.Request) {
	unhealthy := func(reason string) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "error": reason})
	}
	if err := s.d.Store.Check(); err != nil {
		s.d.Log.Warn().Err(err).Msg("health: store")
		unhealthy("state store unhealthy")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if err := s.d.Engine.Ping(ctx); err != nil {
		s.d.Log.Warn().Err(err).Msg("health: docker")
		unhealthy("docker engine unreachable")
		return
	}
	rep, err := ask(s, r, s.d.AskTimeout, func(c chan<- messages.HealthReply) any { return &messages.GetHealth{Reply: c} })
	if err != nil {
		unhealthy("registry not answering")
		return
	}
	if !rep.Ready {
		unhealthy(rep.Reason)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}
