package takeover

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence/fredv013"
)

const (
	flat     = "0f02ec1e-e2e7-4534-9481-d4f87e6b84a4"
	stack    = "524b4ffa-26ec-48ca-bae0-203dffa1aef5"
	retained = "fa1fb569-741b-4383-8073-0d1cc4091cd5"
	failed   = "0e5fad62-11ba-4899-a477-be03237703d9"
	root     = "/vol"
	tenant   = "fred-tenant"
	image    = "127.0.0.1:5000/berth/workload:test"
)

var now = time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)

// fredContainer is a container as fred v0.13 makes it (labels read off the real daemon).
func fredContainer(lease, svc string, idx, n int) dockerio.FredObject {
	name := "fred-" + lease + "-" + svc + "-" + itoa(idx)
	return dockerio.FredObject{Kind: "container", ID: name + "-id", Name: name, Lease: lease, State: "running", ImageID: "sha256:31d4",
		Networks: map[string]string{dockerio.FredTenantNetwork(tenant): "net-id"},
		Mounts:   []dockerio.FredMount{{Type: "tmpfs", Destination: "/tmp"}, {Type: "tmpfs", Destination: "/run"}},
		Labels: map[string]string{"fred.managed": "true", "fred.backend_name": "docker", "fred.lease_uuid": lease, "fred.tenant": tenant,
			"fred.provider_uuid": "p", "fred.sku": "docker-micro", "fred.instance_index": itoa(idx), "fred.fail_count": "0",
			"fred.callback_url": "http://cb/" + lease, "fred.service_name": svc,
			"com.docker.compose.project": "fred-" + lease, "com.docker.compose.service": manifest.ComposeKey(svc, n, idx)}}
}

func itoa(i int) string { return string(rune('0' + i)) }

// host is a fred host every rule admits: a flat lease (two releases), a stack
// (web ×2, cache), one pending callback.
func host() Evidence {
	flatManifest := `{"image":"` + image + `","ports":{"8080/tcp":{}}}`
	stackManifest := `{"services":{"web":` + flatManifest + `,"cache":` + flatManifest + `}}`
	return Evidence{Now: now,
		Objects: []dockerio.FredObject{
			fredContainer(flat, "app", 0, 1),
			fredContainer(stack, "web", 0, 2), fredContainer(stack, "web", 1, 2), fredContainer(stack, "cache", 0, 1),
			{Kind: "network", ID: "net-id", Name: dockerio.FredTenantNetwork(tenant), Labels: map[string]string{"fred.tenant": tenant}},
		},
		Root: VolumeRoot{Path: root, Filesystem: "btrfs", Entries: map[string]bool{}},
		Stores: &fredv013.Stores{
			Releases: map[string][]fredv013.Release{
				flat:  {{Version: 1, Status: "superseded", Manifest: []byte(flatManifest)}, {Version: 2, Status: "active", Manifest: []byte(flatManifest)}},
				stack: {{Version: 1, Status: "active", Manifest: []byte(stackManifest)}},
			},
			Retentions:  map[string]fredv013.Retention{},
			Diagnostics: map[string]fredv013.Diagnostic{},
			Callbacks:   map[string]fredv013.Callback{flat: {LeaseUUID: flat, Status: "success", CreatedAt: now.Add(-time.Hour)}},
		}}
}

// withRetention adds a retained lease, as fred's close with retain_on_close leaves it.
func withRetention(ev *Evidence) {
	ev.Root.Entries["fred-retained-"+retained+"-app-0"] = true
	ev.Stores.Retentions[retained] = fredv013.Retention{OriginalLeaseUUID: retained, Status: "active",
		Items:         []messages.LeaseItem{{SKU: "docker-small", Quantity: 1, ServiceName: "app"}},
		StackManifest: []byte(`{"services":{"app":{"image":"` + image + `"}}}`), RetainedVolumeNames: []string{"fred-retained-" + retained + "-app-0"}}
}

func rules() Rules {
	return Rules{Backend: "docker", CallbackMaxAge: 24 * time.Hour,
		Profile: func(sku string) (lease.Profile, bool) {
			return map[string]lease.Profile{"docker-micro": {CPUCores: 0.25, MemoryMB: 256}, "docker-small": {CPUCores: 0.25, MemoryMB: 256, DiskMB: 64}}[sku],
				sku == "docker-micro" || sku == "docker-small"
		},
		Build: func(raw []byte, items []messages.LeaseItem) (*manifest.Lease, error) {
			return manifest.Build(raw, items, manifest.Options{AllowedRegistries: []string{"127.0.0.1:5000"}})
		}}
}

func TestClassify_AnAdmissibleHostIsReady_EveryLeaseWithItsStatusAndItems(t *testing.T) {
	r := Classify(host(), rules())
	var out bytes.Buffer
	r.Print(&out)
	if !r.Ready() || !strings.HasSuffix(out.String(), "\n"+ReadyLine+"\n") {
		t.Fatalf("not ready:\n%s", out.String())
	}
	want := map[string]string{flat: ReadyCohort, stack: ReadyCohort}
	if len(r.Leases) != len(want) {
		t.Fatalf("leases %+v", r.Leases)
	}
	for _, l := range r.Leases {
		if want[l.Lease] != l.Status {
			t.Fatalf("lease %s: %s, want %s", l.Lease, l.Status, want[l.Lease])
		}
	}
	if !strings.Contains(out.String(), "items cache: 1× docker-micro, web: 2× docker-micro") ||
		!strings.Contains(out.String(), "note  callback_pending: "+flat) {
		t.Fatalf("report:\n%s", out.String())
	}
}

func TestClassify_AnExitedCohortIsFailedAsFredsColdStartCountsIt(t *testing.T) {
	ev := host()
	ev.Objects[0].State = "exited"
	ev.Objects[0].Labels["fred.fail_count"] = "1"
	r := Classify(ev, rules())
	if l := leaseOf(t, r, flat); !r.Ready() || l.Status != FailedColdStart || l.FailCount != 2 {
		t.Fatalf("%+v", l)
	}
}

// Every refusal reason, from one change to an admissible host.
func TestClassify_EachRefusalHasItsReason(t *testing.T) {
	for code, tc := range map[string]struct {
		lease string // "" = a host refusal
		edit  func(*Evidence, *Rules)
	}{
		NonCanonicalUUID: {"0F02EC1E-E2E7-4534-9481-D4F87E6B84A4", func(ev *Evidence, _ *Rules) {
			ev.Objects[0].Lease = strings.ToUpper(flat)
		}},
		PreStack:           {flat, func(ev *Evidence, _ *Rules) { delete(ev.Objects[0].Labels, "fred.service_name") }},
		MigrationRemnant:   {flat, func(ev *Evidence, _ *Rules) { ev.Objects[0].Name += "-prev" }},
		CohortShape:        {stack, func(ev *Evidence, _ *Rules) { ev.Objects[1].Labels["com.docker.compose.service"] = "web" }},
		IncoherentIdentity: {stack, func(ev *Evidence, _ *Rules) { ev.Objects[2].Labels["fred.tenant"] = "other" }},
		UnknownSKU: {flat, func(_ *Evidence, r *Rules) {
			r.Profile = func(string) (lease.Profile, bool) { return lease.Profile{}, false }
		}},
		PartialCohort: {stack, func(ev *Evidence, _ *Rules) {
			ev.Objects = append(ev.Objects[:1], ev.Objects[2:]...) // web-0 lost: web-1 alone
		}},
		ReleaseMismatch: {stack, func(ev *Evidence, _ *Rules) {
			ev.Stores.Releases[stack] = []fredv013.Release{{Version: 1, Status: "active", Manifest: ev.Stores.Releases[flat][0].Manifest}}
		}},
		InterruptedMaint: {flat, func(ev *Evidence, _ *Rules) {
			ev.Stores.Releases[flat] = append(ev.Stores.Releases[flat], fredv013.Release{Version: 3, Status: "deploying"})
		}},
		NotAdmissible: {flat, func(ev *Evidence, _ *Rules) {
			ev.Stores.Releases[flat][1].Manifest = []byte(`{"image":"` + image + `","ports":{"8080/tcp":{"host_port":8080}}}`)
		}},
		InFlight:     {stack, func(ev *Evidence, _ *Rules) { ev.Objects[3].State = "restarting" }},
		NetworkShape: {flat, func(ev *Evidence, _ *Rules) { ev.Objects[0].Networks["bridge"] = "b" }},
		MountShape: {flat, func(ev *Evidence, _ *Rules) {
			ev.Objects[0].Mounts = append(ev.Objects[0].Mounts, dockerio.FredMount{Type: "bind", Source: "/etc", Destination: "/x"})
		}},
		InterruptedClose: {retained, func(ev *Evidence, _ *Rules) { withRetention(ev); ev.Root.Entries = map[string]bool{} }},
		RestoreInFlight: {retained, func(ev *Evidence, _ *Rules) {
			withRetention(ev)
			rec := ev.Stores.Retentions[retained]
			rec.Status = "restoring"
			ev.Stores.Retentions[retained] = rec
		}},
		UnresolvedClose: {"b2b2b2b2-0000-4000-8000-000000000000", func(ev *Evidence, _ *Rules) {
			l := "b2b2b2b2-0000-4000-8000-000000000000"
			ev.Stores.Releases[l] = ev.Stores.Releases[flat]
			ev.Root.Entries["fred-"+l+"-app-0"] = true
		}},
		StoreMalformed: {retained, func(ev *Evidence, _ *Rules) {
			withRetention(ev)
			rec := ev.Stores.Retentions[retained]
			rec.Status = "archived" // fred v0.13 writes no such status
			ev.Stores.Retentions[retained] = rec
		}},
		NoVolumeRoot:     {"", func(ev *Evidence, _ *Rules) { withRetention(ev); ev.Root.Path = "" }},
		FilesystemUnsup:  {"", func(ev *Evidence, _ *Rules) { ev.Root.Filesystem = "xfs" }},
		ForeignInstall:   {"", func(ev *Evidence, _ *Rules) { ev.Root.Installation = "inst-1" }},
		IngressOff:       {flat, func(ev *Evidence, _ *Rules) { ev.Objects[0].Labels["fred.fqdn"] = "app-1a2b3c4.apps.example.test" }},
		CallbacksPending: {"", func(_ *Evidence, r *Rules) { r.RequireDrained = true }},
	} {
		t.Run(code, func(t *testing.T) {
			ev, rl := host(), rules()
			tc.edit(&ev, &rl)
			r := Classify(ev, rl)
			if r.Ready() {
				t.Fatalf("ready after the change")
			}
			var found []Finding
			if tc.lease == "" {
				found = r.Host
			} else {
				found = leaseOf(t, r, tc.lease).Refusals
			}
			for _, f := range found {
				if f.Code == code {
					return
				}
			}
			t.Fatalf("refusals %+v (host %+v), want %s", found, r.Host, code)
		})
	}
}

// Judged, named, and refused until adopting it is built: a retained lease's
// data whose layout its absent image cannot prove. A live lease's nested
// VOLUME is adopted (fred's layout, converted at its first relaunch), and so
// is a diskless instance's writable-path volume (destroyed at close); a
// diskless instance binding anything else of its volume is refused.
func TestClassify_WhatCannotBeAdoptedYetIsRefusedByName(t *testing.T) {
	ev := host()
	withRetention(&ev) // its image is not among ev.Images
	ev.Objects[0].Mounts = append(ev.Objects[0].Mounts, dockerio.FredMount{Type: "bind", Source: root + "/fred-" + flat + "-app-0/_wp/etc", Destination: "/etc/x"})
	ev.Objects[1].Labels["fred.sku"], ev.Objects[2].Labels["fred.sku"] = "docker-small", "docker-small"
	ev.Objects[1].Image.Volumes = []string{"/var/lib/data"}
	ev.Objects[1].Mounts = append(ev.Objects[1].Mounts, dockerio.FredMount{Type: "bind", Source: root + "/fred-" + stack + "-web-0/var/lib/data", Destination: "/var/lib/data"})
	r := Classify(ev, rules())
	if r.Ready() {
		t.Fatal("ready")
	}
	for _, id := range []string{stack, flat} {
		if l := leaseOf(t, r, id); len(l.Refusals) > 0 {
			t.Fatalf("lease %s: %+v, want it adopted", id, l)
		}
	}
	if l := leaseOf(t, r, retained); len(l.Refusals) != 1 || l.Refusals[0].Code != NotAdoptableYet || !strings.Contains(l.Refusals[0].Detail, "is not on this host") {
		t.Fatalf("lease %s: %+v, want %s", retained, l, NotAdoptableYet)
	}
	ev.Objects[0].Mounts[len(ev.Objects[0].Mounts)-1].Source = root + "/fred-" + flat + "-app-0/data"
	if l := leaseOf(t, Classify(ev, rules()), flat); len(l.Refusals) != 1 || l.Refusals[0].Code != MountShape {
		t.Fatalf("a diskless instance binding its volume's data: %+v, want %s", l, MountShape)
	}
}

func TestClassify_NotesWhatIsNeitherAdoptedNorRefused(t *testing.T) {
	ev := host()
	stale := "c3c3c3c3-0000-4000-8000-000000000000"
	ev.Stores.Releases[stale] = ev.Stores.Releases[flat]                      // fred's ENG-410: nothing left of it
	ev.Root.Entries["fred-d4d4d4d4-0000-4000-8000-000000000000-app-0"] = true // claimed by nothing
	ev.Stores.Callbacks[stack] = fredv013.Callback{LeaseUUID: stack, Status: "success", CreatedAt: now.Add(-48 * time.Hour)}
	ev.Objects = append(ev.Objects, dockerio.FredObject{Kind: "network", ID: "n2", Name: dockerio.FredTenantNetwork("gone"), Labels: map[string]string{"fred.tenant": "gone"}})
	r := Classify(ev, rules())
	if !r.Ready() {
		t.Fatalf("refused: %+v %+v", r.Host, r.Leases)
	}
	got := map[string]bool{}
	for _, n := range r.Notes {
		got[n.Code+" "+strings.Fields(n.Detail)[0]] = true
	}
	for _, want := range []string{StaleHistory + " " + stale, UnexplainedVolume + " fred-d4d4d4d4-0000-4000-8000-000000000000-app-0",
		CallbackExpired + " " + stack + ":", CallbackImported + " " + flat + ":", IdleTenantNetwork + " " + dockerio.FredTenantNetwork("gone")} {
		if !got[want] {
			t.Fatalf("no note %q in %+v", want, r.Notes)
		}
	}
}

func leaseOf(t *testing.T, r *Report, id string) Lease {
	t.Helper()
	for _, l := range r.Leases {
		if l.Lease == id {
			return l
		}
	}
	t.Fatalf("no lease %s in %+v", id, r.Leases)
	return Lease{}
}

func TestReport_JSONSaysWhatTheTextSays(t *testing.T) {
	ev := host()
	ev.Objects[0].State = "paused"
	r := Classify(ev, rules())
	var out bytes.Buffer
	r.PrintJSON(&out)
	var got struct {
		Ready  bool    `json:"ready"`
		Leases []Lease `json:"leases"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Ready || strings.Contains(out.String(), ReadyLine) {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, l := range got.Leases {
		if l.Lease == flat && (len(l.Refusals) != 1 || l.Refusals[0].Code != InFlight) {
			t.Fatalf("lease %+v", l)
		}
	}
	r = Classify(host(), rules())
	out.Reset()
	r.PrintJSON(&out)
	if !strings.HasSuffix(out.String(), "}\n"+ReadyLine+"\n") {
		t.Fatalf("ready host:\n%s", out.String())
	}
}

func TestClassify_AnImageBerthdWouldNotRelaunchIsAdoptedWithAWarning(t *testing.T) {
	ev := host()
	ev.Objects[0].Image.Labels = map[string]string{"fred.lease_uuid": "forged"} // a reserved label
	ev.Objects[1].ImageID = ""
	r := Classify(ev, rules())
	if !r.Ready() {
		t.Fatalf("refused: %+v", r.Leases)
	}
	if w := leaseOf(t, r, flat).Warnings; len(w) != 1 || w[0].Code != RelaunchNotAdmissible {
		t.Fatalf("flat: %+v", w)
	}
	if w := leaseOf(t, r, stack).Warnings; len(w) != 1 || w[0].Code != ImageMissing {
		t.Fatalf("stack: %+v", w)
	}
	var out bytes.Buffer
	r.Print(&out)
	if !strings.Contains(out.String(), "lease "+flat+"  adopt-with-warning") {
		t.Fatalf("%s", out.String())
	}
}
