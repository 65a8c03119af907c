package dockerio_test

import (
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
)

func TestImageKeys_IDsAsIsReferencesAsTheirRepository(t *testing.T) {
	id := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	got := dockerio.ImageKeys("nginx:1.25", "127.0.0.1:5000/berth/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", id, "", "UPPER:bad")
	want := []string{"docker.io/library/nginx", "127.0.0.1:5000/berth/x", id}
	if !slices.Equal(got, want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
}

func TestImageHolds_RemoveRefusesAKeyHeldNowOrSinceTheMark(t *testing.T) {
	h := dockerio.NewImageHolds()
	before := h.Hold([]string{"b"})
	before()
	mark, done := h.Mark()
	release := h.Hold([]string{"a"})
	ran, _ := h.Remove(mark, []string{"a"}, func() error { t.Fatal("removed a held key"); return nil })
	if ran {
		t.Fatal("Remove ran on a held key")
	}
	release()
	if ran, _ := h.Remove(mark, []string{"a"}, func() error { t.Fatal("removed a key held since the mark"); return nil }); ran {
		t.Fatal("Remove ran on a key held since the mark")
	}
	if ran, _ := h.Remove(mark, []string{"b"}, func() error { return nil }); !ran {
		t.Fatal("Remove refused a key released before the mark")
	}
	done()
	mark, done = h.Mark()
	defer done()
	if ran, _ := h.Remove(mark, []string{"a"}, func() error { return nil }); !ran {
		t.Fatal("Remove refused a key nobody held since the mark")
	}
}

func TestImageHolds_HoldWaitsForARemovalUnderWay(t *testing.T) {
	h := dockerio.NewImageHolds()
	mark, done := h.Mark()
	defer done()
	inRemove, finish := make(chan struct{}), make(chan struct{})
	go h.Remove(mark, []string{"a"}, func() error { close(inRemove); <-finish; return nil })
	<-inRemove
	held := make(chan struct{})
	go func() { h.Hold([]string{"a", "b"}); close(held) }()
	select {
	case <-held:
		t.Fatal("a hold was taken while its key was being removed")
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the hold never got through after the removal")
	}
}

func TestImageHolds_NilHoldsNothing(t *testing.T) {
	var h *dockerio.ImageHolds
	h.Hold([]string{"a"})()
	mark, done := h.Mark()
	done()
	if ran, err := h.Remove(mark, []string{"a"}, func() error { return nil }); !ran || err != nil {
		t.Fatal("nil holds refused a removal")
	}
}
