package steps

import (
	"errors"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// A rejected launch is a definite failure only for what its cohort shows: an
// exited or unhealthy container, or one left created after the daemon refused
// its start. One Compose never started — a dependency flapped — is no finding:
// the attempt stays in flight for recovery (the seed keeps ContainerStartFailed
// for a start the daemon refused).
func TestRejected_ContainerStartFailedOnlyForAStartTheDaemonRefused(t *testing.T) {
	upErr := errors.New("compose up: dependency failed to start")
	for _, tc := range []struct {
		name   string
		cohort []messages.Container
		reason string // "" = no finding
	}{
		{"start refused", []messages.Container{{State: "created", StartRefused: true}}, messages.ReasonContainerStartFailed},
		{"never started (a dependency flapped)", []messages.Container{{State: "running", Health: "healthy"}, {State: "created"}}, ""},
		{"a dependency exited", []messages.Container{{State: "exited"}, {State: "created"}}, messages.ReasonContainerExited},
		{"a dependency unhealthy", []messages.Container{{State: "running", Health: "unhealthy"}, {State: "created"}}, messages.ReasonHealthCheckFailed},
	} {
		err := Rejected(upErr, tc.cohort)
		var f *Failed
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v, want no finding", tc.name, err)
		case tc.reason != "" && (!errors.As(err, &f) || f.Reason != tc.reason):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.reason)
		}
	}
}
