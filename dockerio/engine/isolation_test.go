package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/dockerio"
)

// TestGuardIsolation_RemoteDockerHost_Refused: the guard belongs on dockerd's
// host; berthd talking to another host's dockerd cannot install it and says so.
func TestGuardIsolation_RemoteDockerHost_Refused(t *testing.T) {
	e := &Engine{opts: Options{Host: "tcp://10.0.0.7:2376"}}
	_, err := e.GuardIsolation(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not this host's dockerd") || !errors.Is(err, dockerio.ErrUnavailable) {
		t.Fatalf("GuardIsolation on a remote dockerd = %v, want an ErrUnavailable refusal naming it", err)
	}
}
