// Package takeover is berthd's takeover of a live fred v0.13 host (issue 29):
// the read-only preflight that proves what can be adopted. Classify is pure —
// fred's stores, fred's Docker objects and its volume root in, a report out —
// so every refusal reason is table-tested without fred or Docker; gather.go
// reads the evidence and writes nothing anywhere.
package takeover

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/messages/policy"
	"github.com/berth-dev/berth/persistence/fredv013"
)

// Evidence is everything the preflight reads.
type Evidence struct {
	Stores  *fredv013.Stores
	Objects []dockerio.FredObject         // fred's containers and networks of the backend name
	Images  map[string]dockerio.FredImage // the images retained manifests name, by reference (absent: not on this host)
	Root    VolumeRoot
	Now     time.Time
}

// VolumeRoot is fred's volume_data_path as found.
type VolumeRoot struct {
	Path         string
	Filesystem   string           // volumes.Detect's name; "" when no root is configured
	Entries      map[string]bool  // the fred-* directories in it
	Installation string           // a .berth-installation marker's content ("" none)
	Usage        map[string]int64 // bytes each fred-* directory holds
}

// Rules are what berthd admits.
type Rules struct {
	Backend         string
	Profile         func(sku string) (lease.Profile, bool) // sku_mapping → sku_profiles, as admission resolves it
	RetentionMaxAge time.Duration
	Ingress         bool                                                                       // berthd routes through Traefik (ingress.enabled)
	Build           func(manifest []byte, items []messages.LeaseItem) (*manifest.Lease, error) // berthd's manifest rules
	CallbackMaxAge  time.Duration
	RequireDrained  bool // the seed's rule: no pending fred callback at all
}

// Refusal and note codes: each is a reason an operator can look up (README).
const (
	FredRunning        = "fred_running"
	StoreMalformed     = "store_malformed"
	DataDirNotEmpty    = "data_dir_not_empty"
	FilesystemUnsup    = "volume_filesystem_unsupported"
	NoVolumeRoot       = "no_volume_root"
	ForeignInstall     = "foreign_installation"
	NonCanonicalUUID   = "non_canonical_uuid"
	PreStack           = "pre_stack"
	MigrationRemnant   = "migration_remnant"
	CohortShape        = "cohort_shape"
	IncoherentIdentity = "incoherent_identity"
	UnknownSKU         = "unknown_sku"
	PartialCohort      = "partial_cohort"
	ReleaseMismatch    = "release_mismatch"
	InterruptedMaint   = "interrupted_maintenance"
	NotAdmissible      = "manifest_not_admissible"
	InFlight           = "in_flight"
	NetworkShape       = "network_shape"
	MountShape         = "mount_shape"
	InterruptedClose   = "interrupted_close"
	RestoreInFlight    = "restore_in_flight"
	UnresolvedClose    = "unresolved_close"
	CallbacksPending   = "callbacks_pending"
	IngressOff         = "ingress_off" // fred routed the lease through Traefik; berthd's ingress is off
	// NotAdoptableYet: a shape this berthd judges but cannot adopt yet (a
	// retained lease whose image is not on the host: its layout is unproven):
	// refused rather than left behind unseen.
	NotAdoptableYet = "not_adoptable_yet"

	StaleHistory          = "stale_history"           // an active release with nothing left: fred lists it nowhere
	CallbackImported      = "callback_pending"        // delivered once by berthd after adoption
	CallbackExpired       = "callback_expired"        // older than callback_max_age: fred would drop it
	UnexplainedVolume     = "unexplained_volume"      // claimed by nothing: kept, never touched
	IdleTenantNetwork     = "idle_tenant_network"     // removed once no adopted lease uses it
	ImageMissing          = "image_missing"           // the relaunch will need the image again
	RelaunchNotAdmissible = "relaunch_not_admissible" // berthd's image rules refuse it: adopted, its first relaunch fails
	ReapingRetention      = "reaping_retention"
	FailedColdStart       = "failed"
	ReadyCohort           = "ready"
	RetainedLease         = "retained"
	DiagnosticsOnly       = "failed_diagnostics_only"
)

// Finding is one reason, with what it is about.
type Finding struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Lease is one lease's verdict.
type Lease struct {
	Lease     string               `json:"lease_uuid"`
	Status    string               `json:"status"` // ready, failed, retained, reaping_retention, failed_diagnostics_only
	Items     []messages.LeaseItem `json:"items,omitempty"`
	FailCount int                  `json:"fail_count,omitempty"`
	Refusals  []Finding            `json:"refusals,omitempty"`
	Warnings  []Finding            `json:"warnings,omitempty"`
}

// Report is the preflight's answer.
type Report struct {
	Backend string    `json:"backend_name"`
	Host    []Finding `json:"host_refusals,omitempty"`
	Leases  []Lease   `json:"leases"`
	Notes   []Finding `json:"notes,omitempty"` // reported; neither adopted nor refused
}

// Ready: nothing is refused.
func (r *Report) Ready() bool {
	if len(r.Host) > 0 {
		return false
	}
	for _, l := range r.Leases {
		if len(l.Refusals) > 0 {
			return false
		}
	}
	return true
}

// Classify judges fred's host against berthd's rules.
func Classify(ev Evidence, rules Rules) *Report {
	r := &Report{Backend: rules.Backend}
	r.judgeRoot(ev.Root, ev.Stores)
	cohorts, networks := byLease(ev.Objects)
	used := map[string]bool{}
	for _, lease := range slices.Sorted(maps.Keys(cohorts)) {
		l := judgeCohort(lease, cohorts[lease], ev, rules)
		for _, c := range cohorts[lease] {
			for _, id := range c.Networks {
				used[id] = true
			}
		}
		r.Leases = append(r.Leases, l)
	}
	for _, n := range networks {
		r.judgeNetwork(n, used[n.ID])
	}
	for _, lease := range slices.Sorted(maps.Keys(ev.Stores.Retentions)) {
		r.Leases = append(r.Leases, judgeRetention(ev.Stores.Retentions[lease], cohorts[lease] != nil, ev.Root, ev.Images, rules))
	}
	r.judgeLeftovers(ev, cohorts)
	r.judgeCallbacks(ev, rules)
	sort.SliceStable(r.Leases, func(i, j int) bool { return r.Leases[i].Lease < r.Leases[j].Lease })
	return r
}

// judgeRoot refuses a volume root berthd cannot run, or one another berth
// installation claims.
func (r *Report) judgeRoot(root VolumeRoot, st *fredv013.Stores) {
	needs := len(root.Entries) > 0 || len(st.Retentions) > 0
	switch {
	case root.Path == "" && needs:
		r.Host = append(r.Host, Finding{NoVolumeRoot, "fred keeps volumes but volume_data_path is not configured"})
	case root.Filesystem == "xfs" || root.Filesystem == "zfs":
		r.Host = append(r.Host, Finding{FilesystemUnsup, fmt.Sprintf("%s is %s: berthd has no %s quota driver (this build: btrfs only)",
			root.Path, root.Filesystem, root.Filesystem)})
	case needs && root.Filesystem != "btrfs":
		r.Host = append(r.Host, Finding{FilesystemUnsup, fmt.Sprintf("%s is %s, not btrfs", root.Path, root.Filesystem)})
	}
	if root.Installation != "" {
		r.Host = append(r.Host, Finding{ForeignInstall, fmt.Sprintf("%s is claimed by berth installation %s", root.Path, root.Installation)})
	}
}

// byLease groups fred's containers by lease and returns its networks.
func byLease(objs []dockerio.FredObject) (map[string][]dockerio.FredObject, []dockerio.FredObject) {
	cohorts := map[string][]dockerio.FredObject{}
	var networks []dockerio.FredObject
	for _, o := range objs {
		if o.Kind == "network" {
			networks = append(networks, o)
			continue
		}
		cohorts[o.Lease] = append(cohorts[o.Lease], o)
	}
	return cohorts, networks
}

func (r *Report) judgeNetwork(n dockerio.FredObject, used bool) {
	tenant, ok := n.Labels[dockerio.LabelTenant]
	if !ok || n.Name != dockerio.FredTenantNetwork(tenant) {
		r.Host = append(r.Host, Finding{NetworkShape, fmt.Sprintf("network %s is not fred's tenant network of tenant %q", n.Name, tenant)})
		return
	}
	if !used {
		r.Notes = append(r.Notes, Finding{IdleTenantNetwork, n.Name})
	}
}

// cohort is one lease's containers read service by service.
type cohort struct {
	services map[string][]int // service → instance indices
	skus     map[string]string
	failed   bool
	fail     int
}

// judgeCohort is P4: a lease with containers.
func judgeCohort(lease string, cs []dockerio.FredObject, ev Evidence, rules Rules) Lease {
	l := Lease{Lease: lease, Status: ReadyCohort}
	refuse := func(code, format string, args ...any) {
		l.Refusals = append(l.Refusals, Finding{code, fmt.Sprintf(format, args...)})
	}
	if !messages.ValidLeaseID(lease) {
		refuse(NonCanonicalUUID, "lease %q is not a canonical lower-case UUID", lease)
		return l
	}
	co := cohort{services: map[string][]int{}, skus: map[string]string{}}
	first := cs[0].Labels
	for _, c := range cs {
		svc := c.Labels[dockerio.LabelService]
		if svc == "" {
			refuse(PreStack, "container %s has no fred.service_name (a pre-stack cohort)", c.Name)
			continue
		}
		if strings.Contains(c.Name, "-prev") {
			refuse(MigrationRemnant, "container %s is a -prev rollback remnant", c.Name)
		}
		for _, key := range []string{dockerio.LabelTenant, dockerio.LabelProvider, dockerio.LabelCallbackURL} {
			if c.Labels[key] != first[key] {
				refuse(IncoherentIdentity, "containers disagree on %s", key)
			}
		}
		if sku, seen := co.skus[svc]; seen && sku != c.Labels[dockerio.LabelSKU] {
			refuse(IncoherentIdentity, "service %s runs SKUs %q and %q", svc, sku, c.Labels[dockerio.LabelSKU])
		}
		co.skus[svc] = c.Labels[dockerio.LabelSKU]
		idx, err := strconv.Atoi(c.Labels[dockerio.LabelInstance])
		if err != nil || idx < 0 {
			refuse(CohortShape, "container %s has instance index %q", c.Name, c.Labels[dockerio.LabelInstance])
			continue
		}
		co.services[svc] = append(co.services[svc], idx)
		judgeState(c, &co, refuse)
		prof, _ := rules.Profile(c.Labels[dockerio.LabelSKU])
		judgeAttachments(c, lease, svc, idx, ev.Root.Path, prof.DiskMB > 0, refuse)
		if c.Labels[ingress.LabelFQDN] != "" && !rules.Ingress {
			refuse(IngressOff, "container %s is routed as %s: enable berthd's ingress, or its relaunch loses its name", c.Name, c.Labels[ingress.LabelFQDN])
		}
		if c.ImageID == "" {
			l.Warnings = append(l.Warnings, Finding{ImageMissing, c.Name + ": its image is gone; a relaunch pulls the tag again"})
		} else if _, err := policy.Admit(c.Image.Volumes, c.Image.Labels); err != nil {
			l.Warnings = append(l.Warnings, Finding{RelaunchNotAdmissible, c.Name + ": " + err.Error() + " (it runs on; a relaunch will fail)"})
		}
	}
	if len(l.Refusals) > 0 {
		return l
	}
	for _, c := range cs {
		svc := c.Labels[dockerio.LabelService]
		idx, _ := strconv.Atoi(c.Labels[dockerio.LabelInstance])
		n := len(co.services[svc])
		want := "fred-" + lease + "-" + svc + "-" + strconv.Itoa(idx)
		if strings.TrimPrefix(c.Name, "/") != want || c.Labels["com.docker.compose.project"] != "fred-"+lease ||
			c.Labels["com.docker.compose.service"] != manifest.ComposeKey(svc, n, idx) {
			refuse(CohortShape, "container %s is not fred's %s (project fred-%s, service key %s)", c.Name, want, lease, manifest.ComposeKey(svc, n, idx))
		}
	}
	for _, svc := range slices.Sorted(maps.Keys(co.services)) {
		idx := co.services[svc]
		slices.Sort(idx)
		for i, got := range idx {
			if got != i {
				refuse(PartialCohort, "service %s has instances %v, not 0..%d", svc, idx, len(idx)-1)
				break
			}
		}
		l.Items = append(l.Items, messages.LeaseItem{SKU: co.skus[svc], Quantity: len(idx), ServiceName: svc})
		if _, ok := rules.Profile(co.skus[svc]); !ok {
			refuse(UnknownSKU, "service %s runs SKU %q, which sku_mapping/sku_profiles do not resolve", svc, co.skus[svc])
		}
	}
	judgeReleases(ev.Stores.Releases[lease], l.Items, rules, refuse)
	if co.failed {
		l.Status, l.FailCount = FailedColdStart, co.fail+1
	}
	return l
}

// judgeState: running is ready; exited or dead is failed, counted as fred's own
// cold start counts it; anything between is a lease in flight.
func judgeState(c dockerio.FredObject, co *cohort, refuse func(string, string, ...any)) {
	switch c.State {
	case "running":
	case "exited", "dead":
		co.failed = true
	default:
		refuse(InFlight, "container %s is %s", c.Name, c.State)
	}
	if n, err := strconv.Atoi(c.Labels[dockerio.LabelFailCount]); err == nil && n > co.fail {
		co.fail = n
	}
}

// judgeAttachments: one network, the tenant's; binds only into the instance's
// own volume (of a diskless SKU: its writable paths only); no Docker volume. Nested VOLUME targets are
// fred's layout: the lease's first relaunch moves them onto berthd's.
func judgeAttachments(c dockerio.FredObject, lease, svc string, idx int, root string, stateful bool, refuse func(string, string, ...any)) {
	tenantNet := dockerio.FredTenantNetwork(c.Labels[dockerio.LabelTenant])
	if len(c.Networks) != 1 || c.Networks[tenantNet] == "" {
		refuse(NetworkShape, "container %s is attached to %v, not to its tenant network %s only", c.Name, slices.Sorted(maps.Keys(c.Networks)), tenantNet)
	}
	own := strings.TrimSuffix(root, "/") + "/" + messages.VolumeName(lease, svc, idx)
	for _, m := range c.Mounts {
		switch {
		case m.Type == "tmpfs":
		case m.Type == "bind" && root != "" && (m.Source == own || strings.HasPrefix(m.Source, own+"/")):
			// A diskless instance's: its writable paths only (fred's scratch under
			// the canonical name), destroyed at close, never retained.
			if !stateful && !strings.HasPrefix(m.Source, own+"/"+dockerio.WritableRoot+"/") {
				refuse(MountShape, "container %s of a diskless SKU mounts %s at %s: only writable paths belong there", c.Name, m.Source, m.Destination)
			}
		default:
			refuse(MountShape, "container %s mounts %s %s at %s", c.Name, m.Type, m.Source, m.Destination)
		}
	}
}

// nestedTargets are the VOLUME targets of more than one path element: fred
// keeps /var/lib/x at var/lib/x in the instance's volume, berthd at
// var%2Flib%2Fx; a one-element target (/data) is data in both.
func nestedTargets(volumes []string) []string {
	var out []string
	for _, v := range volumes {
		if strings.Contains(strings.Trim(path.Clean(v), "/"), "/") {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// judgeReleases: an active release whose manifest berthd admits for the
// cohort's items, and no maintenance interrupted.
func judgeReleases(rs []fredv013.Release, items []messages.LeaseItem, rules Rules, refuse func(string, string, ...any)) {
	var active *fredv013.Release
	for i := range rs {
		if rs[i].Status == fredv013.ReleaseActive && (active == nil || rs[i].Version > active.Version) {
			active = &rs[i]
		}
	}
	if len(rs) > 0 && slices.MaxFunc(rs, func(a, b fredv013.Release) int { return a.Version - b.Version }).Status == fredv013.ReleaseDeploying {
		refuse(InterruptedMaint, "the latest release is deploying: a restart or update was interrupted")
	}
	if active == nil {
		refuse(ReleaseMismatch, "no active release")
		return
	}
	if got, want := manifestServices(active.Manifest), itemServices(items); !slices.Equal(got, want) {
		refuse(ReleaseMismatch, "the active release (v%d) has services %v, the containers %v", active.Version, got, want)
		return
	}
	if _, err := rules.Build(active.Manifest, items); err != nil {
		refuse(NotAdmissible, "the active release (v%d): %s", active.Version, messages.SafeMessage(err))
	}
}

// manifestServices are the service names of a manifest: its services' keys, or
// "app" for the flat form (fred names a lone service so).
func manifestServices(raw []byte) []string {
	var m struct {
		Services map[string]json.RawMessage `json:"services"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Services == nil {
		return []string{"app"}
	}
	return slices.Sorted(maps.Keys(m.Services))
}

func itemServices(items []messages.LeaseItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.ServiceName)
	}
	slices.Sort(out)
	return out
}

// judgeRetention is P5.
func judgeRetention(rec fredv013.Retention, hasContainers bool, root VolumeRoot, images map[string]dockerio.FredImage, rules Rules) Lease {
	l := Lease{Lease: rec.OriginalLeaseUUID, Status: RetainedLease, Items: rec.Items}
	refuse := func(code, format string, args ...any) {
		l.Refusals = append(l.Refusals, Finding{code, fmt.Sprintf(format, args...)})
	}
	if !messages.ValidLeaseID(rec.OriginalLeaseUUID) {
		refuse(NonCanonicalUUID, "retained lease %q is not a canonical lower-case UUID", rec.OriginalLeaseUUID)
		return l
	}
	switch rec.Status {
	case fredv013.RetentionRestoring:
		refuse(RestoreInFlight, "a restore into %s was interrupted", rec.NewLeaseUUID)
		return l
	case fredv013.RetentionReaping:
		// Adopted reaping: berthd's reaper finishes what fred began (a volume
		// fred destroyed already is gone for it too).
		l.Status = ReapingRetention
	case fredv013.RetentionActive:
	default:
		refuse(StoreMalformed, "retention status %q", rec.Status)
		return l
	}
	if hasContainers || len(canonicalVolumes(root, rec.OriginalLeaseUUID)) > 0 {
		refuse(InterruptedClose, "the lease is retained but still has containers or live volumes")
	}
	for _, v := range rec.RetainedVolumeNames {
		if !strings.HasPrefix(v, "fred-retained-"+rec.OriginalLeaseUUID+"-") || !root.Entries[v] && l.Status != ReapingRetention {
			refuse(InterruptedClose, "retained volume %s is not in %s", v, root.Path)
		}
	}
	for _, it := range rec.Items {
		if _, ok := rules.Profile(it.SKU); !ok {
			refuse(UnknownSKU, "retained item %s runs SKU %q, which sku_mapping/sku_profiles do not resolve", it.ServiceName, it.SKU)
		}
	}
	built, err := rules.Build(rec.StackManifest, rec.Items)
	if err != nil {
		refuse(NotAdmissible, "the retained manifest: %s (a restore would be refused)", messages.SafeMessage(err))
		return l
	}
	if l.Status == ReapingRetention {
		return l // never restored: its layout does not matter
	}
	for _, name := range slices.Sorted(maps.Keys(built.Services)) {
		// Its image's VOLUMEs say the layout (nested ones are unnested by the restore).
		ref := built.Services[name].Image
		if _, ok := images[ref]; !ok {
			refuse(NotAdoptableYet, "service %s's image %s is not on this host: the layout of its retained data cannot be proven", name, ref)
		}
	}
	return l
}

// canonicalVolumes are the live volume directories of a lease.
func canonicalVolumes(root VolumeRoot, lease string) []string {
	var out []string
	for name := range root.Entries {
		if strings.HasPrefix(name, "fred-"+lease+"-") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// judgeLeftovers: P6 (an active release with nothing running and nothing
// retained), the diagnostics-only failed leases fred still lists, and P8
// (volumes nothing explains).
func (r *Report) judgeLeftovers(ev Evidence, cohorts map[string][]dockerio.FredObject) {
	st := ev.Stores
	for _, lease := range slices.Sorted(maps.Keys(st.Releases)) {
		if cohorts[lease] != nil {
			continue
		}
		if _, retained := st.Retentions[lease]; retained {
			continue
		}
		if vols := canonicalVolumes(ev.Root, lease); len(vols) > 0 {
			r.Leases = append(r.Leases, Lease{Lease: lease, Status: UnresolvedClose, Refusals: []Finding{{UnresolvedClose,
				fmt.Sprintf("releases but no containers and no retention record, while volumes %v remain: a close fred never finished", vols)}}})
			continue
		}
		r.Notes = append(r.Notes, Finding{StaleHistory, lease})
	}
	// A failed lease fred knows only by its diagnostics: its capture is
	// adopted, and berthd answers for it as fred did (failed, listed nowhere).
	for _, lease := range slices.Sorted(maps.Keys(st.Diagnostics)) {
		_, retained := st.Retentions[lease]
		judged := slices.ContainsFunc(r.Leases, func(l Lease) bool { return l.Lease == lease })
		if cohorts[lease] != nil || retained || judged {
			continue
		}
		l := Lease{Lease: lease, Status: DiagnosticsOnly, FailCount: st.Diagnostics[lease].FailCount}
		if !messages.ValidLeaseID(lease) {
			l.Refusals = []Finding{{NonCanonicalUUID, "fred's diagnostics of a lease whose UUID is not canonical"}}
		}
		r.Leases = append(r.Leases, l)
	}
	claimed := map[string]bool{}
	for _, rec := range st.Retentions {
		for _, v := range rec.RetainedVolumeNames {
			claimed[v] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ev.Root.Entries)) {
		if !claimed[name] && !explained(name, cohorts, st) {
			r.Notes = append(r.Notes, Finding{UnexplainedVolume, name})
		}
	}
}

// explained: a live volume of a lease that has containers or releases (the
// latter judged above as an unresolved close).
func explained(name string, cohorts map[string][]dockerio.FredObject, st *fredv013.Stores) bool {
	lease, ok := volumeLease(name)
	if !ok {
		return false
	}
	_, hasReleases := st.Releases[lease]
	return cohorts[lease] != nil || hasReleases
}

// volumeLease is the lease of a live volume name fred-<lease>-<svc>-<i>.
func volumeLease(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "fred-")
	if !ok || len(rest) < 36 || !messages.ValidLeaseID(rest[:36]) {
		return "", false
	}
	return rest[:36], true
}

// judgeCallbacks is P7: fred's undelivered callbacks are imported into the
// outbox (delivered once, signed) unless older than callback_max_age, which
// fred itself would drop — or, under the seed's rule, refused.
func (r *Report) judgeCallbacks(ev Evidence, rules Rules) {
	for _, lease := range slices.Sorted(maps.Keys(ev.Stores.Callbacks)) {
		cb := ev.Stores.Callbacks[lease]
		what := fmt.Sprintf("%s: %s of %s", lease, cb.Status, cb.CreatedAt.UTC().Format(time.RFC3339))
		switch {
		case rules.RequireDrained:
			r.Host = append(r.Host, Finding{CallbacksPending, what + " (-require-drained: let fred deliver it first)"})
		case rules.CallbackMaxAge > 0 && ev.Now.Sub(cb.CreatedAt) > rules.CallbackMaxAge:
			r.Notes = append(r.Notes, Finding{CallbackExpired, what})
		default:
			r.Notes = append(r.Notes, Finding{CallbackImported, what})
		}
	}
}
