package lease_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

// A lease over the mount budget is refused as soon as its images' VOLUMEs are
// known: one definite failure (image_pull_failed, the rule in its message),
// before any helper — no user resolved, nothing detected or seeded, nothing
// launched — and never launched again.
func TestLease_MountBudgetExceeded_FailsOnceBeforeAnyHelper(t *testing.T) {
	h := newHarness(t, nil)
	vols := make([]string, 16)
	for i := range vols {
		vols[i] = fmt.Sprintf("/v%d", i)
	}
	const wide = "127.0.0.1:5000/berth/unit-wide:1"
	h.eng.AddImage(wide, dockerio.ImageInfo{Volumes: vols, User: "app", UID: 1000, GID: 1000})
	svc := plainService("web", 1000) // 1,000 × (16 VOLUMEs + /tmp, /run + 4 writable paths) = 22,000 mounts
	svc.Manifest.Image = wide
	l := h.start(newSpec(1, svc))
	h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })

	st := l.state()
	if st.Status != lease.Failed || st.FailCount != 1 || st.Budget.Streak != 0 || st.Reason != messages.ReasonImagePullFailed ||
		!strings.HasPrefix(st.Message, "image metadata is not admissible: ") || !strings.Contains(st.Message, "16384") {
		t.Fatalf("state %s fail_count %d streak %d reason %q message %q; want failed once (uncounted), ImagePullFailed naming the budget",
			st.Status, st.FailCount, st.Budget.Streak, st.Reason, st.Message)
	}
	for _, op := range []fake.Op{fake.OpImageUser, fake.OpDetectWritable, fake.OpSeedWritable, fake.OpUp} {
		if n := h.eng.Calls(op); n != 0 {
			t.Errorf("%s called %d times before the refusal", op, n)
		}
	}
	h.stayQuiet("the refused lease was launched again", 300*time.Millisecond, func() bool {
		return count(l.events(), lease.EvProvisionStarted) != 1
	})
	rows := l.rows()
	if len(rows) != 1 {
		t.Fatalf("%d callback rows, want the one failed completion", len(rows))
	}
	if cb := callback(t, rows[0]); cb.Status != messages.CallbackFailed || !strings.HasPrefix(cb.Error, messages.ReasonImagePullFailed) {
		t.Errorf("callback %+v, want failed ImagePullFailed", cb)
	}
}

// Within the budget the images' users are resolved after admission, once per
// image and user, and the lease launches.
func TestLease_MountBudgetWithin_ResolvesUsersThenLaunches(t *testing.T) {
	h := newHarness(t, nil)
	l := h.start(newSpec(1, plainService("web", 2), plainService("api", 1)))
	h.awaitReport("ready", isReady)
	if n := h.eng.Calls(fake.OpImageUser); n != 1 {
		t.Errorf("image user resolved %d times for one image of one user, want 1", n)
	}
	if st := l.state(); st.Status != lease.Ready {
		t.Fatalf("status %s", st.Status)
	}
}
