package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

func TestLogs_TailLinesAndByteCap_KeepTheEnd(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 2*time.Minute)
	// 2000 lines of 100 bytes, odd ones on stderr, even ones on stdout.
	if err := e.Up(ctx, l.plan(workloadService("app", 1, info, "lines", "2000", "100"))); err != nil {
		t.Fatalf("Up: %v", err)
	}
	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil || len(cohort) != 1 {
		t.Fatalf("Cohort = %v, %v", cohort, err)
	}
	id := cohort[0].ID
	eventually(t, time.Minute, "all 2000 lines logged", func() bool {
		text, _, err := e.Logs(ctx, id, 2000, 1<<20)
		return err == nil && strings.Count(text, "\n") == 2000
	})

	// Docker copies stdout and stderr on separate pipes, so a burst's two streams
	// interleave by copy time, not by write order: compare with Docker's own order.
	all, truncated, err := e.Logs(ctx, id, 2000, 1<<20)
	if err != nil || truncated {
		t.Fatalf("Logs(tail 2000) truncated=%v err=%v", truncated, err)
	}
	allLines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	seen := map[string]bool{}
	for _, ln := range allLines {
		if len(ln) != 99 || !strings.HasPrefix(ln, "line ") {
			t.Fatalf("line %.12q has %d bytes, want 99 (stdout and stderr frames must not mix)", ln, len(ln))
		}
		seen[ln[:11]] = true
	}
	if len(allLines) != 2000 || len(seen) != 2000 || !seen["line 000001"] || !seen["line 002000"] {
		t.Fatalf("Logs(tail 2000) = %d lines (%d distinct), want all 2000 from stdout and stderr", len(allLines), len(seen))
	}

	text, truncated, err := e.Logs(ctx, id, 10, 1<<20)
	if err != nil || truncated {
		t.Fatalf("Logs(tail 10) truncated=%v err=%v", truncated, err)
	}
	if want := strings.Join(allLines[len(allLines)-10:], "\n") + "\n"; text != want {
		t.Fatalf("Logs(tail 10) =\n%s\nwant the last 10 lines of the full log:\n%s", text, want)
	}

	text, truncated, err = e.Logs(ctx, id, 2000, 5000)
	if err != nil || !truncated {
		t.Fatalf("Logs(tail 2000, 5000 bytes) truncated=%v err=%v", truncated, err)
	}
	if len(text) > 5000 || len(text) < 4900 {
		t.Errorf("capped logs are %d bytes, want ≤ 5000 and nearly all of it", len(text))
	}
	if !strings.HasPrefix(text, "line ") || !strings.HasSuffix(all, text) {
		t.Errorf("capped logs must start on a line boundary and keep the end: %.20q … %.20q", text, text[max(0, len(text)-20):])
	}

	if _, _, err := e.Logs(ctx, "no-such-container-"+uuid.NewString(), 10, 100); !cerrdefs.IsNotFound(err) {
		t.Errorf("Logs(unknown) = %v, want ErrNotFound", err)
	}
}

func TestEvents_StartAndDieOfThisInstallationOnly_ClosedWhenCtxEnds(t *testing.T) {
	e := newTestEngine(t)
	other := newTestEngine(t)
	info := ensurePulled(t, e)
	mine := newTestLease(t, e)
	theirs := newTestLease(t, other)
	ctx := testCtx(t, 3*time.Minute)

	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	events, errc := e.Events(streamCtx)

	// Another installation's container starts and dies first; none of it may arrive.
	if err := other.Up(ctx, theirs.plan(workloadService("job", 1, info, "exit", "5", "100ms"))); err != nil {
		t.Fatalf("Up theirs: %v", err)
	}
	theirCohort, _ := other.Cohort(ctx, theirs.Lease)
	eventually(t, time.Minute, "their job exited", func() bool {
		c, err := e.Inspect(ctx, theirCohort[0].ID)
		return err == nil && c.State == "exited"
	})

	job := workloadService("job", 1, info, "exit", "3", "1s")
	if err := e.Up(ctx, mine.plan(job)); err != nil {
		t.Fatalf("Up mine: %v", err)
	}
	var got []dockerio.Event
	deadline := time.After(time.Minute)
	for !hasAction(got, "die") {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream closed early: %v", <-errc)
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("no die event within a minute; got %+v", got)
		}
	}
	for _, ev := range got {
		if ev.Lease != mine.Lease {
			t.Errorf("event of another installation delivered: %+v", ev)
		}
	}
	if !hasAction(got, "start") {
		t.Errorf("no start event before die: %+v", got)
	}
	die := got[len(got)-1]
	if die.ExitCode != 3 || die.Service != "job" || die.Index != 0 || die.Generation != 1 || die.ContainerID == "" || die.At.IsZero() {
		t.Errorf("die event = %+v, want job/0 generation 1 exit 3", die)
	}

	stop()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("stream end = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("error channel silent after ctx ended")
	}
	for range events { // must be closed, else this hangs until the test times out
	}
}

func hasAction(evs []dockerio.Event, action string) bool {
	for _, ev := range evs {
		if ev.Action == action {
			return true
		}
	}
	return false
}

func TestListManaged_OnlyThisInstallation_HealthFromStatus(t *testing.T) {
	ea, eb := newTestEngine(t), newTestEngine(t)
	info := ensurePulled(t, ea)
	a := newTestLease(t, ea)
	b := newTestLease(t, eb)
	ctx := testCtx(t, 3*time.Minute)

	web := workloadService("web", 2, info)
	web.HealthCheck = &manifest.HealthCheck{
		Test: []string{"CMD", "/workload", "get", "http://127.0.0.1:8080/"}, Interval: manifest.Duration(500 * time.Millisecond), Retries: 3,
	}
	if err := ea.Up(ctx, a.plan(web)); err != nil {
		t.Fatalf("Up a: %v", err)
	}
	if err := eb.Up(ctx, b.plan(workloadService("app", 1, info, "exit", "7", "0s"))); err != nil {
		t.Fatalf("Up b: %v", err)
	}

	var listA []messages.Container
	eventually(t, time.Minute, "both web instances healthy in the list", func() bool {
		var err error
		listA, err = ea.ListManaged(ctx)
		if err != nil || len(listA) != 2 {
			return false
		}
		return listA[0].Health == "healthy" && listA[1].Health == "healthy"
	})
	for i, c := range listA {
		if c.Lease != a.Lease || c.Service != "web" || c.Index != i || c.State != "running" || c.ImageID != info.ID || c.Generation != 1 {
			t.Errorf("ListManaged(a)[%d] = %+v", i, c)
		}
		if bnd := c.Ports["8080/tcp"]; bnd.HostIP != "127.0.0.1" || bnd.HostPort == "" {
			t.Errorf("ListManaged(a)[%d] ports = %v", i, c.Ports)
		}
	}
	var listB []messages.Container
	eventually(t, time.Minute, "b's app exited", func() bool {
		var err error
		listB, err = eb.ListManaged(ctx)
		return err == nil && len(listB) == 1 && listB[0].State == "exited"
	})
	if c := listB[0]; c.Lease != b.Lease || c.ExitCode != 7 || c.Health != "" {
		t.Errorf("ListManaged(b) = %+v, want b's app, exit 7, no health", c)
	}
	if none, err := newTestEngine(t).ListManaged(ctx); err != nil || len(none) != 0 {
		t.Errorf("ListManaged of a third installation = %v, %v", none, err)
	}
}
