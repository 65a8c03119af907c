package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// TestCrashSuite_Kill9DuringRetainingClosesRestoresAndReaps_NoDataLostNothingLeaked:
// tenant data under kill -9, on a real btrfs volume root. Four stateful leases,
// each holding its own marker, are closed at once (retaining) and berthd is
// killed mid-close; three are restored at once (one promoted) and berthd is
// killed mid-restore; the restored leases are closed and, with a short grace,
// berthd is killed while the reaper destroys their data. After every restart each
// interrupted operation settles within 30 s, every retained or restored lease
// holds exactly its own data, every volume in the root is explained by a live
// lease or a retention record, and at the end only the unrestored source's
// record and volume are left (its grace is long), the pool holds exactly its
// bytes, and the callbacks are exactly what the journals say.
func TestCrashSuite_Kill9DuringRetainingClosesRestoresAndReaps_NoDataLostNothingLeaked(t *testing.T) {
	// Sequential: the crash suite's settle bounds (30 s) hold on a quiet engine.
	mnt, root := btrfsRoot(t)
	base := []string{"volume_data_path: " + root, "volume_mount_path: " + mnt, "volume_filesystem: btrfs",
		"sku_profiles: {small: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 64}, big: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 128}}",
		"retain_on_close: true", "retention_reap_interval: 1s", "provision_timeout: 10m"}
	w := newCrashWorkload(t, base...)
	d := w.d
	const settle = 30 * time.Second

	srcs := make([]string, 4)
	for i := range srcs {
		srcs[i] = provisionReady(t, d, w.cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
		if code, body := putFile(t, hostPort(t, d, srcs[i], "app", 0), "/data/marker", []byte(srcs[i])); code >= 300 {
			t.Fatalf("write marker: %d %s", code, body)
		}
		w.track(srcs[i], true)
	}

	// 1. Retaining closes, cut by kill -9.
	w.concurrently(srcs, func(l string) {
		body, _ := json.Marshal(messages.DeprovisionRequest{LeaseUUID: l})
		_, _ = w.quietCall("POST", "/deprovision", body)
	})
	time.Sleep(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
	d.kill9()
	d.startChild(true)
	w.closeWithin(settle, srcs...)
	if got := retainedLeases(d); !slices.Equal(got, sorted(srcs)) {
		t.Fatalf("retained after the crashed closes: %v, want every source %v", got, sorted(srcs))
	}
	assertRootExplained(t, d, root)

	// 2. Restores (the first promoted to big), cut by kill -9.
	dests := make([]string, 3)
	restore := func(i int) []byte {
		sku := "small"
		if i == 0 {
			sku = "big"
		}
		body, _ := json.Marshal(messages.RestoreRequest{LeaseUUID: dests[i], FromLeaseUUID: srcs[i], Tenant: "tenant-test",
			ProviderUUID: "provider-test", Items: []messages.LeaseItem{{SKU: sku, Quantity: 1}}, CallbackURL: w.cb.callbackURL()})
		return body
	}
	for i := range dests {
		dests[i] = uuid.NewString()
		w.track(dests[i], false)
	}
	w.concurrently([]string{"0", "1", "2"}, func(s string) {
		i := int(s[0] - '0')
		_, _ = w.quietCall("POST", "/restore", restore(i))
	})
	time.Sleep(time.Duration(200+w.rng.IntN(2500)) * time.Millisecond)
	d.kill9()
	d.startChild(true)
	deadline := time.Now().Add(settle)
	for i, dest := range dests {
		for {
			r := d.get("/provisions/" + dest)
			if r.Status == 404 {
				// The crash ate the restore before it was admitted: providerd sends it again.
				if code, _ := w.quietCall("POST", "/restore", restore(i)); code != 202 {
					t.Fatalf("restore %s again after the crash: %d", dest, code)
				}
				continue
			}
			var info messages.ProvisionInfo
			r.json(t, &info)
			if info.Status == messages.StatusReady {
				break
			}
			if info.Status == messages.StatusFailed || time.Now().After(deadline) {
				t.Fatalf("restore %s of %s: %+v, want ready within %s of the restart\n%s", dest, srcs[i], info, settle, tail(d.log.String(), 4000))
			}
			time.Sleep(200 * time.Millisecond)
		}
		code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, dest, "app", 0), "/file?path=/data/marker")
		if err != nil || code != 200 || body != srcs[i] {
			t.Fatalf("restored lease %s reads %d %q %v, want exactly the data of %s", dest, code, body, err, srcs[i])
		}
	}
	if got := retainedLeases(d); !slices.Equal(got, []string{srcs[3]}) {
		t.Fatalf("retained after the restores: %v, want only the unrestored %s", got, srcs[3])
	}
	assertRootExplained(t, d, root)

	// 3. With a short grace from now on, the restored leases close (retaining) and
	// berthd is killed mid-close; then again while the reaper destroys their data.
	d.kill9()
	d.reconfigure(append(base, "retention_max_age: 4s")...)
	d.startChild(true)
	w.concurrently(dests, func(l string) {
		body, _ := json.Marshal(messages.DeprovisionRequest{LeaseUUID: l})
		_, _ = w.quietCall("POST", "/deprovision", body)
	})
	for _, l := range dests {
		w.track(l, true)
	}
	time.Sleep(time.Duration(w.rng.IntN(1500)) * time.Millisecond)
	d.kill9()
	d.startChild(true)
	w.closeWithin(settle, dests...)
	time.Sleep(time.Duration(3000+w.rng.IntN(2500)) * time.Millisecond)
	d.kill9()
	d.startChild(true)
	// A record's grace is fixed when it is made: the unrestored source keeps its
	// long one; the restored leases' records (made under 4 s) are reaped.
	deadline = time.Now().Add(settle)
	for !slices.Equal(retainedLeasesAny(d), []string{srcs[3]}) {
		if time.Now().After(deadline) {
			t.Fatalf("records after the crashed reap: %+v, want only %s's", d.retentionList(), srcs[3])
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got := managedVolumes(t, root); !slices.Equal(got, []string{messages.RetainedVolumeName(srcs[3], "app", 0)}) {
		t.Fatalf("volumes after the reap %v, want only the unrestored source's", got)
	}
	assertPoolEmpty(t, d)
	if s := d.stats(); s.RetainedDiskMB != 64 {
		t.Fatalf("retained disk after the reap: %+v, want the one 64 MB record", s)
	}
	for _, l := range append(append([]string(nil), srcs...), dests...) {
		for _, c := range w.cb.forLease(l) {
			if c.Body.Status == messages.CallbackDeprovisioned && !c.Body.Retained {
				t.Errorf("lease %s: a retaining close called back retained: false", l)
			}
		}
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	if code := d.waitExit(90 * time.Second); code != 0 {
		t.Fatalf("stop exit %d", code)
	}
	w.verify()
}

// track records a lease the test created outside the workload's rounds.
func (w *crashWorkload) track(l string, closing bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent[l], w.admitted[l] = true, true
	if closing {
		w.closing[l] = true
	}
}

// concurrently runs f for every item at once and returns without waiting: the
// caller kills berthd while the calls are in flight.
func (w *crashWorkload) concurrently(items []string, f func(string)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Add(1)
		go func() { defer wg.Done(); f(it) }()
	}
	go wg.Wait()
}

// closeWithin retries each deprovision (as providerd does) until it answers 200,
// all within the budget.
func (w *crashWorkload) closeWithin(budget time.Duration, leases ...string) {
	w.t.Helper()
	deadline := time.Now().Add(budget)
	for _, l := range leases {
		body, _ := json.Marshal(messages.DeprovisionRequest{LeaseUUID: l})
		for {
			code, err := w.quietCall("POST", "/deprovision", body)
			if err == nil && code == 200 {
				break
			}
			if time.Now().After(deadline) {
				w.t.Fatalf("deprovision %s not settled within %s of the restart (last %d %v)\n%s", l, budget, code, err,
					tail(w.d.log.String(), 4000))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// reconfigure rewrites the daemon's config with the harness defaults and extra.
func (d *daemonProc) reconfigure(extra ...string) {
	d.t.Helper()
	if err := os.WriteFile(d.cfgPath, []byte(testConfig(filepath.Join(d.dir, "data"), d.api, d.debug, extra...)), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// retainedLeases lists the leases with an active retention record, sorted.
func retainedLeases(d *daemonProc) []string {
	var out []string
	for _, r := range d.retentionList() {
		if r.Status == "active" {
			out = append(out, r.LeaseUUID)
		}
	}
	sort.Strings(out)
	return out
}

// retainedLeasesAny lists the leases with a retention record in any status, sorted.
func retainedLeasesAny(d *daemonProc) []string {
	var out []string
	for _, r := range d.retentionList() {
		out = append(out, r.LeaseUUID)
	}
	sort.Strings(out)
	return out
}

// assertRootExplained checks every volume in the root belongs to a live lease
// (its instance volume) or a retention record (its retained volume), and that
// every one of those exists.
func assertRootExplained(t *testing.T, d *daemonProc, root string) {
	t.Helper()
	want := map[string]bool{}
	for _, r := range d.retentionList() {
		want[messages.RetainedVolumeName(r.LeaseUUID, "app", 0)] = true
	}
	var list struct {
		Provisions []messages.ProvisionInfo `json:"provisions"`
	}
	d.get("/provisions").json(t, &list)
	for _, p := range list.Provisions {
		if p.Status != messages.StatusRetained {
			want[messages.VolumeName(p.LeaseUUID, "app", 0)] = true
		}
	}
	got := map[string]bool{}
	for _, n := range managedVolumes(t, root) {
		got[n] = true
		if !want[n] {
			t.Errorf("volume %s in the root is explained by no live lease or retention record", n)
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("volume %s of a live lease or retention record is missing", n)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
