package imagegc

import (
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

const mb = 1 << 20

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// img is an image this installation pulled by repo@digest, d hours after t0.
func owned(refs ...string) func(h int) *Owned {
	return func(h int) *Owned { return &Owned{Refs: refs, PulledAt: t0.Add(time.Duration(h) * time.Hour)} }
}

func stored(id string, size int64, digests ...string) dockerio.StoredImage {
	return dockerio.StoredImage{ID: id, RepoDigests: digests, Size: size}
}

func pins(ready bool, unknown int, ids ...string) messages.ImagePins {
	p := messages.ImagePins{IDs: map[string]struct{}{}, Ready: ready, Unknown: unknown}
	for _, id := range ids {
		p.Add(id)
	}
	return p
}

func TestDecide_WhichImagesToRemove(t *testing.T) {
	a, b, c := "sha256:a", "sha256:b", "sha256:c"
	ra, rb, rc := "r/a@sha256:1", "r/b@sha256:2", "r/c@sha256:3"
	ours := map[string]*Owned{a: owned(ra)(1), b: owned(rb)(2), c: owned(rc)(3)}
	store := []dockerio.StoredImage{stored(c, 10*mb, rc), stored(a, 10*mb, ra), stored(b, 10*mb, rb)}
	cases := []struct {
		name          string
		in            Input
		remove        []string
		inhibited     map[string]int
		storeMB, gone int
	}{
		{name: "within budget: nothing", in: Input{Owned: ours, Store: store, Pins: pins(true, 0), BudgetBytes: 30 * mb, FreeBytes: -1},
			storeMB: 30},
		{name: "over budget: the oldest pulled first, until within", in: Input{Owned: ours, Store: store, Pins: pins(true, 0), BudgetBytes: 15 * mb, FreeBytes: -1},
			remove: []string{a, b}, storeMB: 30},
		{name: "a pinned image is skipped, the next oldest taken", in: Input{Owned: ours, Store: store, Pins: pins(true, 0, a), BudgetBytes: 25 * mb, FreeBytes: -1},
			remove: []string{b}, inhibited: map[string]int{InhibitPinned: 1}, storeMB: 30},
		{name: "an image a container uses is skipped", in: Input{Owned: ours, Store: store, Pins: pins(true, 0), InUse: map[string]int{a: 1}, BudgetBytes: 25 * mb, FreeBytes: -1},
			remove: []string{b}, inhibited: map[string]int{InhibitInUse: 1}, storeMB: 30},
		{name: "pins not whole (registry not ready): nothing removed", in: Input{Owned: ours, Store: store, Pins: pins(false, 0), BudgetBytes: 0, FreeBytes: -1},
			inhibited: map[string]int{InhibitPinsUnknown: 1}, storeMB: 30},
		{name: "pins not whole (a lease not reported): nothing removed", in: Input{Owned: ours, Store: store, Pins: pins(true, 1), BudgetBytes: 0, FreeBytes: -1},
			inhibited: map[string]int{InhibitPinsUnknown: 1}, storeMB: 30},
		{name: "free space below the floor frees what is missing, within budget", in: Input{Owned: ours, Store: store, Pins: pins(true, 0), BudgetBytes: 100 * mb, MinFreeBytes: 50 * mb, FreeBytes: 45 * mb},
			remove: []string{a}, storeMB: 30},
		{name: "free space unknown: the floor is not applied", in: Input{Owned: ours, Store: store, Pins: pins(true, 0), BudgetBytes: 100 * mb, MinFreeBytes: 50 * mb, FreeBytes: -1},
			storeMB: 30},
		{name: "everything pinned: nothing removed, each counted", in: Input{Owned: ours, Store: store, Pins: pins(true, 0, a, b, c), BudgetBytes: 0, FreeBytes: -1},
			inhibited: map[string]int{InhibitPinned: 3}, storeMB: 30},
		{name: "an image not of this installation is never considered nor counted",
			in:     Input{Owned: map[string]*Owned{a: owned(ra)(1)}, Store: append(store, stored("sha256:op", 500*mb, "op/x@sha256:9")), Pins: pins(true, 0), BudgetBytes: 0, FreeBytes: -1},
			remove: []string{a}, storeMB: 10},
		{name: "someone tagged ours: left", in: Input{Owned: ours, Pins: pins(true, 0), BudgetBytes: 0, FreeBytes: -1,
			Store: []dockerio.StoredImage{{ID: a, RepoDigests: []string{ra}, RepoTags: []string{"op/a:latest"}, Size: 10 * mb}}},
			inhibited: map[string]int{InhibitForeign: 1}, storeMB: 10, gone: 2},
		{name: "pulled under another name too: left", in: Input{Owned: ours, Pins: pins(true, 0), BudgetBytes: 0, FreeBytes: -1,
			Store: []dockerio.StoredImage{stored(a, 10*mb, ra, "other/a@sha256:1")}},
			inhibited: map[string]int{InhibitForeign: 1}, storeMB: 10, gone: 2},
		{name: "recorded images missing from the store are forgotten", in: Input{Owned: ours, Store: store[:1], Pins: pins(true, 0), BudgetBytes: 100 * mb, FreeBytes: -1},
			storeMB: 10, gone: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.in)
			var got []string
			for _, r := range p.Remove {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tc.remove) {
				t.Errorf("remove = %v, want %v", got, tc.remove)
			}
			if tc.inhibited == nil {
				tc.inhibited = map[string]int{}
			}
			if len(p.Inhibited) != len(tc.inhibited) {
				t.Errorf("inhibited = %v, want %v", p.Inhibited, tc.inhibited)
			}
			for k, v := range tc.inhibited {
				if p.Inhibited[k] != v {
					t.Errorf("inhibited = %v, want %v", p.Inhibited, tc.inhibited)
				}
			}
			if p.StoreBytes != int64(tc.storeMB)*mb {
				t.Errorf("store bytes = %d MB, want %d", p.StoreBytes/mb, tc.storeMB)
			}
			if len(p.Gone) != tc.gone {
				t.Errorf("gone = %v, want %d", p.Gone, tc.gone)
			}
		})
	}
}
