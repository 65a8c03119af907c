package api

import (
	"bytes"
	"cmp"
	"io"
	"net/http"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// runtimeRefresh is GET /runtime_refresh (the stale leases, every lease's
// outcome, the current or most recent run) and POST /runtime_refresh (start a
// run: 202 with the status, 409 while one is active, 403 when disabled). A
// POST's body is empty or {}: the concurrency is configuration.
func (s *server) runtimeRefresh(w http.ResponseWriter, r *http.Request) {
	var build func(chan<- messages.RefreshReply) any
	status := http.StatusOK
	switch r.Method {
	case http.MethodGet:
		build = func(c chan<- messages.RefreshReply) any { return &messages.GetRefresh{Reply: c} }
	case http.MethodPost:
		if err := emptyBody(r); err != nil {
			writeError(w, err)
			return
		}
		build = func(c chan<- messages.RefreshReply) any { return &messages.StartRefresh{Reply: c} }
		status = http.StatusAccepted
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		return
	}
	rep, err := supervisors.Ask(r.Context(), s.d.Tree, s.d.RefreshPath, s.d.AskTimeout, build)
	answer(w, status, cmp.Or(err, rep.Err), rep.Status)
}

// emptyBody refuses a body other than nothing or {}.
func emptyBody(r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return messages.Refuse(messages.ErrBadRequest, "request body could not be read")
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && !bytes.Equal(b, []byte("{}")) {
		return messages.Refuse(messages.ErrBadRequest, "the body must be empty or {}: the concurrency is runtime_refresh_max_concurrency")
	}
	return nil
}
