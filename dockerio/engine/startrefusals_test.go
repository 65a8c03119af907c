package engine

import (
	"testing"
	"time"
)

func TestContainerOfStart_OnlyTheStartPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1.41/containers/abc123/start": "abc123",
		"/containers/abc123/start":       "abc123",
		"/v1.41/containers/abc123/stop":  "",
		"/v1.41/containers/create":       "",
	} {
		if got := containerOfStart(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// A start the real daemon refuses (its command does not exist) leaves the
// container created and marked refused in the launch's cohort: the seed's
// ContainerStartFailed. The engine learns it from the daemon's answer, not
// from Compose's error text.
func TestLaunch_StartTheDaemonRefuses_CohortMarksItRefused(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	svc := workloadService("app", 1, info)
	svc.Service.Command = []string{"/no/such/binary"}
	ctx := testCtx(t, 2*time.Minute)
	if _, err := e.Launch(ctx, l.plan(svc)); err == nil {
		t.Fatal("a launch whose command does not exist succeeded")
	}
	cohort, err := e.Launched(ctx, l.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(cohort) != 1 || cohort[0].State != "created" || !cohort[0].StartRefused {
		t.Fatalf("cohort %+v, want one created container marked StartRefused", cohort)
	}
}
