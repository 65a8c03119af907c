package api_test

import (
	"net/http"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// A close is answered 200 once its lease closed, or — after CloseWait — once its
// intent is journaled and teardown is under way: a workload that ignores SIGTERM
// must not cost fred v0.13's client a breaker failure on every close. A close the
// lease holds, or never journaled, stays 503 lifecycle_pending.
func TestDeprovision_AnswersByWhatTheLeaseSaid(t *testing.T) {
	body := []byte(`{"lease_uuid":"` + lease + `"}`)
	for _, tc := range []struct {
		name   string
		close  func(*messages.Deprovision)
		status int
		code   string
	}{
		{"closed", func(m *messages.Deprovision) { m.Ticket.Take(); m.Reply <- nil }, http.StatusOK, ""},
		{"journaled and tearing down past CloseWait", func(m *messages.Deprovision) { m.Ticket.Take(); m.Durable <- struct{}{} },
			http.StatusOK, ""},
		{"taken but not journaled within CloseWait", func(m *messages.Deprovision) { m.Ticket.Take() },
			http.StatusServiceUnavailable, "lifecycle_pending"},
		{"held by the lease", func(m *messages.Deprovision) {
			m.Ticket.Take()
			m.Durable <- struct{}{}
			m.Reply <- messages.Refuse(messages.ErrLifecyclePending, "close held: a volume is in use")
		}, http.StatusServiceUnavailable, "lifecycle_pending"},
		{"never taken: refused as busy, never happens", func(*messages.Deprovision) {}, http.StatusServiceUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.s.set(func(s *script) { s.close = tc.close })
			r := e.do(http.MethodPost, "/deprovision", body, "")
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status == http.StatusOK && string(r.body) != `{"status":"ok"}`+"\n" {
				t.Fatalf("body %s", r.body)
			}
			if tc.code != "" && r.json(t)["code"] != tc.code {
				t.Fatalf("body %s, want code %s", r.body, tc.code)
			}
		})
	}
}
