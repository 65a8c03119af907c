package supervisors

import (
	"errors"
	"testing"
	"time"
)

func TestPasses_RecordTheLastFinishedPass(t *testing.T) {
	var p Passes
	if r := p.Report("reconciler", time.Minute); r.Name != "reconciler" || r.Interval != time.Minute || r.Passes != 0 ||
		!r.LastAt.IsZero() || r.Running || r.Err != "" {
		t.Fatalf("before any pass: %+v", r)
	}
	p.running, p.started = true, time.Now().Add(-50*time.Millisecond) // as Start leaves it
	p.again = true
	if r := p.Report("reconciler", time.Minute); !r.Running {
		t.Fatalf("while running: %+v", r)
	}
	before := time.Now()
	if again := p.Finish(nil, "3 leases"); !again {
		t.Fatal("a pass asked for meanwhile was lost")
	}
	r := p.Report("reconciler", time.Minute)
	if r.Passes != 1 || r.LastAt.Before(before) || r.Duration < 50*time.Millisecond || r.Err != "" || r.Detail != "3 leases" || r.Running {
		t.Fatalf("after an ok pass: %+v", r)
	}
	p.running, p.started = true, time.Now()
	if again := p.Finish(errors.New("docker down"), "ignored"); again {
		t.Fatal("no pass was asked for")
	}
	if r := p.Report("reconciler", time.Minute); r.Passes != 2 || r.Err != "docker down" || r.Detail != "" {
		t.Fatalf("after a failed pass: %+v", r)
	}
}
