package debug

import (
	"net/http"
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// Paging of GET /debug/transitions.
const (
	defaultTransitionLimit = 100
	maxTransitionLimit     = messages.TransitionsKept
)

// transitions is GET /debug/transitions?since=SEQ&limit=N: the recent lease
// transitions after seq since, oldest first, and the seq to ask after next.
func (s *server) transitions(w http.ResponseWriter, r *http.Request) {
	since, limit, err := transitionQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rep, err := ask(s, r.Context(), s.opts.RegistryPath, func(c chan<- messages.TransitionsReply) any {
		return &messages.DebugTransitions{Since: since, Limit: limit, Reply: c}
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if rep.Transitions == nil {
		rep.Transitions = []messages.Transition{}
	}
	writeJSON(w, http.StatusOK, rep)
}

// transitionQuery parses since (a seq, default 0) and limit (1…1024, default 100).
func transitionQuery(r *http.Request) (since uint64, limit int, err error) {
	q := r.URL.Query()
	if v := q.Get("since"); v != "" || q.Has("since") {
		if since, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, messages.Refuse(messages.ErrBadRequest, "since must be a non-negative integer (a transition seq)")
		}
	}
	limit = defaultTransitionLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxTransitionLimit {
			return 0, 0, messages.Refuse(messages.ErrBadRequest, "limit must be an integer from 1 to %d", maxTransitionLimit)
		}
	}
	return since, limit, nil
}
