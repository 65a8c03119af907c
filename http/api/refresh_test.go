package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// /runtime_refresh: signed like /restart; POST's body is empty or {} (anything
// else 400 without asking); the refresh actor's refusals map to 403 (disabled)
// and 409 (a run is active); a started run is 202 with its status.
func TestRuntimeRefresh_SignedBodyCheckedRefusalsMapped(t *testing.T) {
	e := newEnv(t)
	status := &messages.RuntimeRefreshStatus{Contract: 2, Active: true, Stale: 1, StaleLeases: []string{lease},
		SharedNetworkLeases: []string{}, Leases: []messages.RefreshRow{}}
	if r := e.do(http.MethodPost, "/runtime_refresh", nil, "-"); r.status != http.StatusUnauthorized {
		t.Fatalf("unsigned POST: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodPost, "/runtime_refresh", []byte(`{"concurrency":8}`), ""); r.status != http.StatusBadRequest {
		t.Fatalf("POST with a body: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodPut, "/runtime_refresh", nil, ""); r.status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	if asked := e.s.log(); len(asked) != 0 {
		t.Fatalf("bad requests asked %v", asked)
	}
	for _, c := range []struct {
		method, body string
		rep          messages.RefreshReply
		want         int
	}{
		{http.MethodPost, "", messages.RefreshReply{Err: messages.Refuse(messages.ErrDisabled, "disabled")}, http.StatusForbidden},
		{http.MethodPost, "{}", messages.RefreshReply{Err: messages.Refuse(messages.ErrInvalidState, "active")}, http.StatusConflict},
		{http.MethodPost, "", messages.RefreshReply{Err: messages.Refuse(messages.ErrUnavailable, "inventory")}, http.StatusServiceUnavailable},
		{http.MethodPost, " {} ", messages.RefreshReply{Status: status}, http.StatusAccepted},
		{http.MethodGet, "", messages.RefreshReply{Status: status}, http.StatusOK},
	} {
		e.s.set(func(s *script) { s.refresh = c.rep })
		r := e.do(c.method, "/runtime_refresh", []byte(c.body), "")
		if r.status != c.want {
			t.Errorf("%s %q answered %v: %d %s, want %d", c.method, c.body, c.rep.Err, r.status, r.body, c.want)
		}
		if c.rep.Status != nil && r.json(t)["stale"] != float64(1) {
			t.Errorf("%s: body %s", c.method, r.body)
		}
	}
	want := []any{"*messages.StartRefresh", "*messages.StartRefresh", "*messages.StartRefresh", "*messages.StartRefresh", "*messages.GetRefresh"}
	if got := e.s.log(); !slices.Equal(got, want) {
		t.Errorf("asked %v", got)
	}
}
