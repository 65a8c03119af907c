package takeover

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/persistence/fredv013"
)

// The adoption's write replays into the very states berthd would have had: the
// registry admits each lease once, in order; each lease starts ready (or failed)
// on fred's cohort, with fred's history; the allow-list names exactly fred's
// objects; the undelivered callback becomes one outbox row for fred's URL.
func TestAdopt_TheWriteReplaysIntoReadyLeasesOnFredsCohorts(t *testing.T) {
	ev := host()
	ev.Objects[0].Ports = []dockerio.FredPort{{Port: 8080, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: 32769}}
	ev.Objects[3].State = "exited" // the stack's cache died while fred was stopped
	rl := rules()
	report := Classify(ev, rl)
	w, rec, err := Adopt(ev, report, rl, "/var/lib/fred", map[string]string{"releases.db": "ab"})
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string][]string{}
	reg := &registry.State{Leases: map[string]*lease.Spec{}, Retentions: map[string]*registry.Retention{}, Closed: map[string]*registry.ClosedUse{}}
	leases := map[string]*lease.State{}
	for _, a := range w.Appends {
		for _, e := range a.Events {
			streams[a.Stream] = append(streams[a.Stream], e.Type)
			switch a.Stream {
			case registry.Stream:
				if err := reg.Apply(e); err != nil {
					t.Fatalf("registry replay: %v", err)
				}
			case RecordStream:
			default:
				st := lease.NewState()
				if err := st.Apply(e); err != nil {
					t.Fatalf("%s replay: %v", a.Stream, err)
				}
				leases[a.Stream] = st
			}
		}
	}
	if len(streams[registry.Stream]) != 2 || reg.Admissions != 2 || reg.Leases[flat] == nil || reg.Leases[stack] == nil {
		t.Fatalf("registry: %v %+v", streams, reg)
	}
	if spec := reg.Leases[stack]; len(spec.Services) != 2 || spec.Services[1].Name != "web" || spec.Services[1].Quantity != 2 ||
		spec.Tenant != tenant || spec.LifecycleURL == "" {
		t.Fatalf("stack spec %+v", spec)
	}
	single := leases[lease.Stream(flat)]
	if single.Status != lease.Ready || len(single.Containers) != 1 || single.Containers[0].ContainerID != ev.Objects[0].ID ||
		len(single.Releases) != 2 || single.Active().Version != 2 || single.Active().Services == nil {
		t.Fatalf("flat lease %+v", single)
	}
	if p, ok := single.Containers[0].Ports.Get("8080/tcp"); !ok || p.HostPort != "32769" {
		t.Fatalf("ports %+v", single.Containers[0].Ports)
	}
	if st := leases[lease.Stream(stack)]; st.Status != lease.Failed || st.FailCount != 1 || len(st.Containers) != 3 {
		t.Fatalf("stack lease %+v", st)
	}
	if len(rec.Allowed.Containers) != 4 || len(rec.Allowed.Networks) != 1 || rec.Allowed.Containers[ev.Objects[2].ID].Index != 1 {
		t.Fatalf("allow-list %+v", rec.Allowed)
	}
	if len(w.Outbox) != 1 || w.Outbox[0].Lease != flat || w.Outbox[0].Kind != "lifecycle" {
		t.Fatalf("outbox %+v", w.Outbox)
	}
	var body messages.Callback
	if err := json.Unmarshal(w.Outbox[0].Body, &body); err != nil || body.Status != "success" || body.LeaseUUID != flat {
		t.Fatalf("callback body %s", w.Outbox[0].Body)
	}
}

func TestAdopt_RefusesAHostThePreflightRefuses(t *testing.T) {
	ev := host()
	ev.Objects[0].State = "restarting"
	if _, _, err := Adopt(ev, Classify(ev, rules()), rules(), "/f", nil); err == nil {
		t.Fatal("adopted a host with a lease in flight")
	}
}

// A stateful cohort in berthd's own layout (one-element VOLUMEs) is adopted with
// its volume where it is; a retained lease becomes a retention record with
// each volume's quota (its SKU's disk) and what it holds.
func TestAdopt_StatefulCohortsAndRetainedData(t *testing.T) {
	ev := host()
	withRetention(&ev)
	ev.Images = map[string]dockerio.FredImage{image: {Volumes: []string{"/data"}}}
	ev.Root.Usage = map[string]int64{"fred-retained-" + retained + "-app-0": 4096}
	ev.Objects[0].Labels["fred.sku"] = "docker-small"
	ev.Objects[0].Image.Volumes = []string{"/data"}
	ev.Objects[0].Mounts = append(ev.Objects[0].Mounts, dockerio.FredMount{Type: "bind", Source: root + "/fred-" + flat + "-app-0/data", Destination: "/data"})
	rl := rules()
	rl.RetentionMaxAge = 24 * time.Hour
	report := Classify(ev, rl)
	if !report.Ready() {
		t.Fatalf("refused: %+v %+v", report.Host, report.Leases)
	}
	w, rec, err := Adopt(ev, report, rl, "/var/lib/fred", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := registryReplay(t, w)
	if spec := reg.Leases[flat]; spec == nil || spec.Services[0].Profile.DiskMB != 64 {
		t.Fatalf("stateful spec %+v", spec)
	}
	r := reg.Retentions[retained]
	if r == nil || r.Status != registry.RetentionActive || len(r.Record.Volumes) != 1 || rec.Retentions[0] != retained {
		t.Fatalf("retention %+v (record %+v)", r, rec)
	}
	if v := r.Record.Volumes[0]; v.Service != "app" || v.Index != 0 || v.QuotaMB != 64 || v.UsedBytes != 4096 ||
		!r.Record.RetainedUntil.Equal(r.Record.RetainedAt.Add(24*time.Hour)) {
		t.Fatalf("retained volume %+v, record %+v", v, r.Record)
	}
}

// Fred's names and routed custom domains are pinned: the lease keeps them for life.
func TestAdopt_PinsFredsNamesAndRoutedDomains(t *testing.T) {
	ev := host()
	ev.Objects[1].Labels["fred.fqdn"], ev.Objects[2].Labels["fred.fqdn"] = "web-0-aaaaaaa.apps.example.test", "web-1-bbbbbbb.apps.example.test"
	ev.Objects[1].Labels["fred.custom_domain"] = "shop.example.org"
	rl := rules()
	rl.Ingress = true
	report := Classify(ev, rl)
	w, _, err := Adopt(ev, report, rl, "/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := &registry.State{Leases: map[string]*lease.Spec{}, Retentions: map[string]*registry.Retention{}, Closed: map[string]*registry.ClosedUse{}}
	var st *lease.State
	for _, a := range w.Appends {
		for _, e := range a.Events {
			switch a.Stream {
			case registry.Stream:
				if err := reg.Apply(e); err != nil {
					t.Fatal(err)
				}
			case lease.Stream(stack):
				st = lease.NewState()
				if err := st.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if pins := reg.Leases[stack].FQDNs; len(pins) != 2 || pins["web/1"] != "web-1-bbbbbbb.apps.example.test" {
		t.Fatalf("pins %+v", pins)
	}
	if d := st.Active().Domains; d["web"] != "shop.example.org" {
		t.Fatalf("routed domains %+v", d)
	}
}

// A failed lease fred knows only by its diagnostics is adopted as its capture
// alone: no admission, no lease stream, nothing for the engine to own; the
// capture says what fred's GET /provisions/{id} and /logs/{id} said. Every
// other diagnostics row fred kept is adopted too.
func TestAdopt_ADiagnosticsOnlyFailedLeaseIsAdoptedAsItsCapture(t *testing.T) {
	ev := host()
	at := now.Add(-time.Hour)
	ev.Stores.Diagnostics[failed] = fredv013.Diagnostic{LeaseUUID: failed, ProviderUUID: "p", Tenant: tenant, Error: "container 0 exited during startup",
		Reason: messages.ReasonContainerExited, Message: "container exited during startup", FailCount: 2, CreatedAt: at,
		Logs: map[string]string{"app/0": "boom\n", "app/1": "bang\n"}}
	ev.Stores.Diagnostics[flat] = fredv013.Diagnostic{LeaseUUID: flat, Reason: messages.ReasonContainerExited, FailCount: 1, CreatedAt: at}
	rl := rules()
	report := Classify(ev, rl)
	if !report.Ready() {
		t.Fatalf("refused: %+v %+v", report.Host, report.Leases)
	}
	if l := leaseOf(t, report, failed); l.Status != DiagnosticsOnly || l.FailCount != 2 || len(l.Refusals) > 0 {
		t.Fatalf("the diagnostics-only lease: %+v", l)
	}
	w, rec, err := Adopt(ev, report, rl, "/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range w.Appends {
		if a.Stream == lease.Stream(failed) {
			t.Fatalf("a lease stream for the diagnostics-only lease: %+v", a)
		}
		for _, e := range a.Events {
			if a.Stream == registry.Stream && strings.Contains(string(e.Data), failed) {
				t.Fatalf("the registry admits the diagnostics-only lease: %s", e.Data)
			}
		}
	}
	if slices.Contains(rec.Leases, failed) || len(rec.Captures) != 2 || !slices.Equal(rec.Diagnosed, []string{failed, flat}) {
		t.Fatalf("record: leases %v, diagnosed %v, %d captures", rec.Leases, rec.Diagnosed, len(rec.Captures))
	}
	c := rec.Captures[0]
	if c.Lease != failed || c.ProviderUUID != "p" || c.FailCount != 2 || c.Reason != messages.ReasonContainerExited ||
		c.Message != "container exited during startup" || !c.At.Equal(at) || c.Kind != lease.CaptureProvision || c.Detail == "" ||
		len(c.Containers) != 2 || c.Containers[1].Service != "app" || c.Containers[1].Index != 1 || c.Containers[1].Logs != "bang\n" {
		t.Fatalf("capture %+v", c)
	}
	if raw, _ := json.Marshal(rec); strings.Contains(string(raw), "boom") {
		t.Fatalf("the journaled record carries the captures: %s", raw)
	}
}

// A live lease whose image nests a VOLUME below a directory is adopted in
// fred's layout, said in its lease.adopted so its first relaunch moves the data
// onto berthd's names; a lease without one is not.
func TestAdopt_ANestedVolumeLeaseIsAdoptedInFredsLayout(t *testing.T) {
	ev := host()
	ev.Objects[1].Labels["fred.sku"], ev.Objects[2].Labels["fred.sku"] = "docker-small", "docker-small"
	for _, i := range []int{1, 2} {
		idx := ev.Objects[i].Labels["fred.instance_index"]
		ev.Objects[i].Image.Volumes = []string{"/var/lib/data"}
		ev.Objects[i].Mounts = append(ev.Objects[i].Mounts, dockerio.FredMount{Type: "bind",
			Source: root + "/fred-" + stack + "-web-" + idx + "/var/lib/data", Destination: "/var/lib/data"})
	}
	rl := rules()
	report := Classify(ev, rl)
	if !report.Ready() {
		t.Fatalf("refused: %+v %+v", report.Host, report.Leases)
	}
	w, _, err := Adopt(ev, report, rl, "/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := adoptedStates(t, w)
	if !st[lease.Stream(stack)].FredLayout || st[lease.Stream(flat)].FredLayout || len(st) != 2 {
		t.Fatalf("fred's layout: stack %v, flat %v", st[lease.Stream(stack)].FredLayout, st[lease.Stream(flat)].FredLayout)
	}
}

// A retention fred was reaping is adopted reaping: its record (its bytes still
// counted) handed to berthd's reaper at once, never restorable; a volume fred
// destroyed already is no refusal.
func TestAdopt_ARetentionFredWasReapingIsAdoptedReaping(t *testing.T) {
	ev := host()
	withRetention(&ev)
	r := ev.Stores.Retentions[retained]
	r.Status, r.ReapingSince = "reaping", now.Add(-time.Minute)
	r.RetainedVolumeNames = append(r.RetainedVolumeNames, "fred-retained-"+retained+"-app-1") // fred destroyed it already
	r.Items[0].Quantity = 2
	ev.Stores.Retentions[retained] = r
	rl := rules()
	report := Classify(ev, rl)
	if !report.Ready() {
		t.Fatalf("refused: %+v %+v", report.Host, report.Leases)
	}
	if l := leaseOf(t, report, retained); l.Status != ReapingRetention {
		t.Fatalf("the reaping retention: %+v", l)
	}
	w, _, err := Adopt(ev, report, rl, "/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := registryReplay(t, w)
	if rec := reg.Retentions[retained]; rec == nil || rec.Status != registry.RetentionReaping || len(rec.Record.Volumes) != 2 {
		t.Fatalf("the adopted record: %+v", rec)
	}
}

// A diskless instance fred gave a writable-path volume (under the canonical
// name) is adopted with that volume as its scratch: named in lease.adopted, so
// the close destroys it; a stateful instance's volume is not scratch.
func TestAdopt_ADisklessInstancesFredVolumeIsItsScratch(t *testing.T) {
	ev := host()
	ev.Objects[0].Mounts = append(ev.Objects[0].Mounts, dockerio.FredMount{Type: "bind", Source: root + "/fred-" + flat + "-app-0/_wp/var%2Flib%2Fapp", Destination: "/var/lib/app"})
	rl := rules()
	report := Classify(ev, rl)
	if !report.Ready() {
		t.Fatalf("refused: %+v %+v", report.Host, report.Leases)
	}
	w, _, err := Adopt(ev, report, rl, "/f", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := adoptedStates(t, w)
	if got := st[lease.Stream(flat)].FredScratch; !slices.Equal(got, []string{messages.VolumeName(flat, "app", 0)}) || len(st[lease.Stream(stack)].FredScratch) > 0 {
		t.Fatalf("fred's scratch volumes: flat %v, stack %v", got, st[lease.Stream(stack)].FredScratch)
	}
}

// adoptedStates are the lease states the write's lease.adopted events replay
// into, by stream.
func adoptedStates(t *testing.T, w persistence.Write) map[string]*lease.State {
	t.Helper()
	out := map[string]*lease.State{}
	for _, a := range w.Appends {
		for _, e := range a.Events {
			if e.Type == lease.EvAdopted {
				st := lease.NewState()
				if err := st.Apply(e); err != nil {
					t.Fatalf("%s replay: %v", a.Stream, err)
				}
				out[a.Stream] = st
			}
		}
	}
	return out
}

// registryReplay is the registry state the write's registry events replay into.
func registryReplay(t *testing.T, w persistence.Write) *registry.State {
	t.Helper()
	reg := &registry.State{Leases: map[string]*lease.Spec{}, Retentions: map[string]*registry.Retention{}, Closed: map[string]*registry.ClosedUse{}}
	for _, a := range w.Appends {
		if a.Stream != registry.Stream {
			continue
		}
		for _, e := range a.Events {
			if err := reg.Apply(e); err != nil {
				t.Fatalf("registry replay: %v", err)
			}
		}
	}
	return reg
}
