package takeover

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/persistence/fredv013"
	"github.com/berth-dev/berth/supervisors"
)

// RecordStream is the stream of the adoption record: what was adopted, from
// where, and the closed allow-list the engine owns fred's objects by.
const RecordStream = "adoption"

// EvRecorded is the adoption record's one event.
const EvRecorded = "adoption.recorded"

// Record is what an adoption recorded.
type Record struct {
	Source     string            `json:"source"` // "fred v0.13"
	Backend    string            `json:"backend_name"`
	FredDir    string            `json:"fred_dir"` // where fred's files are: berthd keeps fred from starting on them
	AdoptedAt  time.Time         `json:"adopted_at"`
	FredFiles  map[string]string `json:"fred_files"` // fred's .db files → sha256 when adopted (they are never written)
	Leases     []string          `json:"leases"`
	Retentions []string          `json:"retentions,omitempty"` // leases fred closed with their data retained
	Callbacks  int               `json:"callbacks"`            // fred's undelivered callbacks, now outbox rows
	Diagnosed  []string          `json:"diagnosed,omitempty"`  // leases whose failure diagnostics fred kept, now berthd's
	Allowed    dockerio.Adopted  `json:"allowed"`
	// Captures are fred's failure diagnostics as berthd's, for diagnostics.db
	// (written before the state, never journaled: diagnostics.db holds them).
	Captures []lease.Capture `json:"-"`
}

// Adopt builds the one write that adopts a fred host the preflight judged
// ready: per live lease its admission (registry stream) and its adopted state
// (its own stream); fred's undelivered callbacks as outbox rows; the record.
// It is pure: nothing is written here.
// Each spec's profiles are frozen from the current config (rules.Profile): the
// only time config prices a lease berthd did not admit.
func Adopt(ev Evidence, report *Report, rules Rules, fredDir string, fredFiles map[string]string) (persistence.Write, Record, error) {
	if !report.Ready() {
		return persistence.Write{}, Record{}, errors.New("the preflight refuses this host")
	}
	rec := Record{Source: "fred v0.13", Backend: rules.Backend, FredDir: fredDir, AdoptedAt: ev.Now.UTC(), FredFiles: fredFiles,
		Allowed: dockerio.Adopted{Containers: map[string]dockerio.AdoptedContainer{}, Networks: map[string]dockerio.AdoptedNetwork{}}}
	var w persistence.Write
	var admissions, retentions []persistence.Event
	cohorts, networks := byLease(ev.Objects)
	for _, l := range report.Leases {
		if l.Status == DiagnosticsOnly {
			continue // its diagnostics are all there is: adopted below
		}
		if l.Status == RetainedLease || l.Status == ReapingRetention {
			closed, err := adoptRetention(ev.Stores.Retentions[l.Lease], ev.Root, ev.Images, rules)
			if err != nil {
				return persistence.Write{}, Record{}, fmt.Errorf("retained lease %s: %w", l.Lease, err)
			}
			retentions = append(retentions, closed)
			if l.Status == ReapingRetention { // fred was destroying it: berthd's reaper finishes
				retentions = append(retentions, registry.ReapingEvent(l.Lease, "adopted", ev.Now.UTC()))
			}
			rec.Retentions = append(rec.Retentions, l.Lease)
			continue
		}
		spec, adopted, err := adoptLease(l, cohorts[l.Lease], ev.Stores.Releases[l.Lease], rules, uint64(len(admissions)+1))
		if err != nil {
			return persistence.Write{}, Record{}, fmt.Errorf("lease %s: %w", l.Lease, err)
		}
		admissions = append(admissions, registry.AdmittedEvent(spec, spec.AdmittedAt))
		w.Appends = append(w.Appends, persistence.Append{Stream: lease.Stream(l.Lease), Events: []persistence.Event{lease.AdoptedEvent(adopted)}})
		for _, c := range cohorts[l.Lease] {
			idx, _ := strconv.Atoi(c.Labels[dockerio.LabelInstance])
			rec.Allowed.Containers[c.ID] = dockerio.AdoptedContainer{Lease: l.Lease, Service: c.Labels[dockerio.LabelService], Index: idx}
		}
		rec.Leases = append(rec.Leases, l.Lease)
	}
	for _, n := range networks {
		rec.Allowed.Networks[n.ID] = dockerio.AdoptedNetwork{Tenant: n.Labels[dockerio.LabelTenant]}
	}
	for _, id := range slices.Sorted(maps.Keys(ev.Stores.Callbacks)) {
		cb := ev.Stores.Callbacks[id]
		if rules.CallbackMaxAge > 0 && ev.Now.Sub(cb.CreatedAt) > rules.CallbackMaxAge {
			continue // fred would drop it
		}
		body, _ := json.Marshal(messages.Callback{LeaseUUID: cb.LeaseUUID, Status: cb.Status, Error: cb.Error, Backend: cb.Backend, Retained: cb.Retained})
		w.Outbox = append(w.Outbox, persistence.OutboxRow{Lease: cb.LeaseUUID, DeliveryID: uuid.NewString(), URL: cb.CallbackURL,
			Body: body, Kind: persistence.KindLifecycle, CreatedAt: cb.CreatedAt})
		rec.Callbacks++
	}
	for _, id := range slices.Sorted(maps.Keys(ev.Stores.Diagnostics)) {
		rec.Captures = append(rec.Captures, adoptDiagnostic(ev.Stores.Diagnostics[id]))
		rec.Diagnosed = append(rec.Diagnosed, id)
	}
	if reg := append(admissions, retentions...); len(reg) > 0 {
		w.Appends = append([]persistence.Append{{Stream: registry.Stream, Events: reg}}, w.Appends...)
	}
	w.Appends = append(w.Appends, persistence.Append{Stream: RecordStream,
		Events: []persistence.Event{supervisors.NewEvent(EvRecorded, 1, rec.AdoptedAt, rec)}})
	return w, rec, nil
}

// adoptLease is one live lease: its spec as berthd would have admitted it, and
// its state as fred left it.
func adoptLease(l Lease, cohort []dockerio.FredObject, releases []fredv013.Release, rules Rules, admission uint64) (*lease.Spec, lease.Adopted, error) {
	labels := cohort[0].Labels
	active := activeRelease(releases)
	built, err := rules.Build(active.Manifest, l.Items)
	if err != nil {
		return nil, lease.Adopted{}, err
	}
	cb := labels[dockerio.LabelCallbackURL]
	admitted := active.CreatedAt
	if at, err := time.Parse(time.RFC3339, labels[dockerio.LabelCreatedAt]); err == nil {
		admitted = at
	}
	spec := &lease.Spec{Lease: l.Lease, Tenant: labels[dockerio.LabelTenant], ProviderUUID: labels[dockerio.LabelProvider],
		Items: built.Items, Flat: built.Flat, Manifest: active.Manifest, CallbackURL: cb, LifecycleURL: callback.LifecycleURL(cb),
		OperationID: callback.OperationID(cb), Admission: admission, AdmittedAt: admitted.UTC()}
	for _, it := range built.Items {
		prof, ok := rules.Profile(it.SKU)
		if !ok {
			return nil, lease.Adopted{}, fmt.Errorf("sku %q resolves to no profile", it.SKU)
		}
		spec.Services = append(spec.Services, lease.ServiceSpec{Name: it.ServiceName, SKU: it.SKU, Quantity: it.Quantity,
			Profile: prof, Manifest: built.Services[it.ServiceName]})
	}
	slices.SortFunc(spec.Services, func(a, b lease.ServiceSpec) int { return strings.Compare(a.Name, b.Name) })
	adopted := lease.Adopted{Admission: admission, OperationID: spec.OperationID, At: admitted.UTC(), FailCount: l.FailCount}
	if l.Status == FailedColdStart {
		adopted.Failed = &lease.Cause{Reason: messages.ReasonContainerExited, Message: "container exited unexpectedly"} // fred's cold start says so
	}
	images := map[string]messages.ImagePin{}
	domains := map[string]string{}
	for _, c := range cohort {
		svc := c.Labels[dockerio.LabelService]
		idx, _ := strconv.Atoi(c.Labels[dockerio.LabelInstance])
		if fqdn := c.Labels[ingress.LabelFQDN]; fqdn != "" { // fred's names, kept: tenants' URLs never change
			if spec.FQDNs == nil {
				spec.FQDNs = map[string]string{}
			}
			spec.FQDNs[svc+"/"+strconv.Itoa(idx)] = fqdn
		}
		if d := c.Labels[ingress.LabelCustomDomain]; d != "" { // routed: no reconcile redeploys for it
			domains[svc] = d
		}
		adopted.FredLayout = adopted.FredLayout || len(nestedTargets(c.Image.Volumes)) > 0
		if prof, _ := rules.Profile(c.Labels[dockerio.LabelSKU]); prof.DiskMB <= 0 && slices.ContainsFunc(c.Mounts, func(m dockerio.FredMount) bool { return m.Type == "bind" }) {
			adopted.FredScratch = append(adopted.FredScratch, messages.VolumeName(l.Lease, svc, idx)) // its writable paths
		}
		ref := built.Services[svc].Image
		images[svc] = messages.ImagePin{Ref: ref, ID: c.ImageID, Digest: repoDigest(ref, c.Image.RepoDigests)}
		inst := lease.Instance{Service: svc, Index: idx, ContainerID: c.ID, Image: ref}
		for _, p := range c.Ports {
			inst.Ports = append(inst.Ports, lease.Port{Key: strconv.Itoa(p.Port) + "/" + p.Protocol,
				PortBinding: messages.PortBinding{HostIP: p.HostIP, HostPort: strconv.Itoa(p.HostPort)}})
		}
		slices.SortFunc(inst.Ports, func(a, b lease.Port) int { return strings.Compare(a.Key, b.Key) })
		adopted.Containers = append(adopted.Containers, inst)
	}
	slices.SortFunc(adopted.Containers, func(a, b lease.Instance) int {
		return strings.Compare(a.Service+"/"+strconv.Itoa(a.Index), b.Service+"/"+strconv.Itoa(b.Index))
	})
	for _, r := range releases {
		rel := lease.Release{Version: r.Version, Status: r.Status, Kind: lease.KindAdopted, CreatedAt: r.CreatedAt,
			Reason: r.Reason, Message: r.Message, Manifest: r.Manifest}
		if r.Version == active.Version {
			rel.Items, rel.Services, rel.OperationID = spec.Items, spec.Services, spec.OperationID
			if len(domains) > 0 {
				rel.Domains = domains
			}
			for _, svc := range slices.Sorted(maps.Keys(images)) {
				rel.Images = append(rel.Images, lease.ServiceImage{Service: svc, ImagePin: images[svc]})
			}
		}
		adopted.Releases = append(adopted.Releases, rel)
	}
	slices.SortFunc(adopted.Releases, func(a, b lease.Release) int { return a.Version - b.Version })
	return spec, adopted, nil
}

// adoptRetention is a lease fred closed with its data retained: a retention
// record, as a retaining close of berthd's makes one. Fred pinned no image: a
// restore resolves the manifest's tags again, as fred's would have.
func adoptRetention(r fredv013.Retention, root VolumeRoot, images map[string]dockerio.FredImage, rules Rules) (persistence.Event, error) {
	built, err := rules.Build(r.StackManifest, r.Items)
	if err != nil {
		return persistence.Event{}, err
	}
	rec := &messages.RetentionRecord{Lease: r.OriginalLeaseUUID, Tenant: r.Tenant, ProviderUUID: r.ProviderUUID,
		Items: built.Items, Manifest: r.StackManifest, RetainedAt: r.CreatedAt.UTC()}
	for _, svc := range built.Services {
		rec.FredLayout = rec.FredLayout || len(nestedTargets(images[svc.Image].Volumes)) > 0 // a restore unnests
	}
	if rules.RetentionMaxAge > 0 {
		rec.RetainedUntil = rec.RetainedAt.Add(rules.RetentionMaxAge)
	}
	for _, name := range r.RetainedVolumeNames {
		svc, idx, ok := retainedInstance(name, r.OriginalLeaseUUID)
		item := slices.IndexFunc(built.Items, func(it messages.LeaseItem) bool { return it.ServiceName == svc })
		if !ok || item < 0 {
			return persistence.Event{}, fmt.Errorf("retained volume %s is of no item", name)
		}
		prof, ok := rules.Profile(built.Items[item].SKU)
		if !ok {
			return persistence.Event{}, fmt.Errorf("sku %q resolves to no profile", built.Items[item].SKU)
		}
		rec.Volumes = append(rec.Volumes, messages.RetainedVolume{Name: name, Service: svc, Index: idx,
			QuotaMB: prof.DiskMB, UsedBytes: root.Usage[name]})
	}
	return registry.ClosedEvent(messages.LeaseClosed{Lease: r.OriginalLeaseUUID, Retention: rec}, rec.RetainedAt), nil
}

// adoptDiagnostic is fred's failure capture of a lease as berthd's: what
// GET /provisions/{id} and /logs/{id} answer for a failed lease fred knows only
// by it (neither lists it), as fred answered. Fred's internal error text is
// kept for operators; it never reaches a tenant.
func adoptDiagnostic(d fredv013.Diagnostic) lease.Capture {
	c := lease.Capture{Lease: d.LeaseUUID, Kind: lease.CaptureProvision, ProviderUUID: d.ProviderUUID, Stamp: lease.Stamp{At: d.CreatedAt.UTC()},
		Cause: lease.Cause{Reason: d.Reason, Message: d.Message}, FailCount: d.FailCount, Detail: d.Error, Containers: []lease.ContainerCapture{}}
	for _, key := range slices.Sorted(maps.Keys(d.Logs)) {
		svc, idx, _ := strings.Cut(key, "/")
		i, _ := strconv.Atoi(idx)
		c.Containers = append(c.Containers, lease.ContainerCapture{Service: svc, Index: i, Logs: d.Logs[key]})
	}
	return c
}

// retainedInstance is the service and index of fred-retained-<lease>-<svc>-<i>.
func retainedInstance(name, lease string) (string, int, bool) {
	rest, ok := strings.CutPrefix(name, "fred-retained-"+lease+"-")
	i := strings.LastIndex(rest, "-")
	if !ok || i <= 0 {
		return "", 0, false
	}
	idx, err := strconv.Atoi(rest[i+1:])
	return rest[:i], idx, err == nil
}

// activeRelease is fred's LatestActive (the preflight proved there is one).
func activeRelease(rs []fredv013.Release) fredv013.Release {
	var out fredv013.Release
	for _, r := range rs {
		if r.Status == fredv013.ReleaseActive && r.Version > out.Version {
			out = r
		}
	}
	return out
}

// repoDigest is the digest of ref's repository among an image's RepoDigests
// ("" when none: a relaunch then resolves the tag, as fred did).
func repoDigest(ref string, digests []string) string {
	repo := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo = ref[:i]
	}
	for _, d := range digests {
		if strings.HasPrefix(d, repo+"@") {
			return d
		}
	}
	return ""
}

// LoadRecord is the adoption a data dir was made by (nil: it was not).
func LoadRecord(store interface {
	Load(stream string) (persistence.Loaded, error)
}) (*Record, error) {
	got, err := store.Load(RecordStream)
	if err != nil {
		return nil, fmt.Errorf("adoption record: %w", err)
	}
	if len(got.Events) == 0 {
		return nil, nil
	}
	if len(got.Events) != 1 || got.Events[0].Type != EvRecorded {
		return nil, fmt.Errorf("adoption record: %d events, want one %s", len(got.Events), EvRecorded)
	}
	rec := new(Record)
	if err := json.Unmarshal(got.Events[0].Data, rec); err != nil {
		return nil, fmt.Errorf("adoption record: %w", err)
	}
	return rec, nil
}
