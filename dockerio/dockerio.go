// Package dockerio is berth's narrow view of the Docker Engine and Compose: the
// types a lease actor plans with and the Engine interface it drives. The real
// adapter lives in dockerio/engine (Docker SDK + compose v2); an in-memory fake for
// unit tests of actor logic lives in dockerio/dockertest/fake. Nothing outside dockerio/engine
// links the Docker SDK or compose.
package dockerio

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/messages/policy"
)

// Labels carried by every managed container, network and volume (seed: Container Labels).
const (
	LabelManaged         = "fred.managed"                // "true"
	LabelLease           = "fred.lease_uuid"             // lease UUID
	LabelTenant          = "fred.tenant"                 // tenant address
	LabelProvider        = "fred.provider_uuid"          // provider UUID
	LabelSKU             = "fred.sku"                    // SKU as requested
	LabelCreatedAt       = "fred.created_at"             // RFC 3339
	LabelService         = "fred.service_name"           // service name ("app" for flat)
	LabelInstance        = "fred.instance_index"         // 0-based index within the service
	LabelFailCount       = "fred.fail_count"             // lifetime failures at creation time
	LabelCallbackURL     = "fred.callback_url"           // exact completion URL
	LabelLifecycleURL    = "fred.lifecycle_callback_url" // lifecycle URL
	LabelRuntimeContract = "fred.runtime_contract"       // RuntimeContract at creation
	LabelMaintenanceID   = "fred.maintenance_id"         // empty for provision launches
	LabelBackend         = "fred.backend_name"           // backend name
	LabelImageRef        = "fred.image_reference"        // manifest image reference
	LabelImageID         = "fred.image_id"               // sha256:… image ID the container runs
	LabelInstallation    = "fred.installation_id"        // this installation's identity (store meta)
	LabelOperationID     = "fred.operation_id"           // provision attempt identity
	LabelGeneration      = "fred.generation"             // provision attempt counter, decimal
	LabelNetworkScope    = "fred.network_scope"          // "lease" on lease networks, "pool" on warm-pool networks
)

// RuntimeContract versions the properties a container keeps until recreated:
// 1 — each lease on its own network; 2 — the tenant seccomp profile (btrfs
// subvolume and snapshot creation refused).
const RuntimeContract = 2

// ContractSeccomp is the contract that brought the tenant seccomp profile.
const ContractSeccomp = 2

// ContractOf is the contract plan's containers are created under.
func ContractOf(plan Plan) int { return cmp.Or(plan.Contract, RuntimeContract) }

// Errors the adapter returns. Each carries its containerd errdefs class, so a
// caller tests the class (errdefs.IsNotFound, IsResourceExhausted, IsConflict)
// unless it needs berth's narrower meaning below; an object Docker does not
// have is errdefs.ErrNotFound itself (or Docker's own NotFound answer).
var (
	// ErrImagePull: the registry refused or could not be reached, or the image is missing.
	ErrImagePull            = errdefs.ErrUnavailable.WithMessage("image pull refused")
	ErrAddressPoolExhausted = errdefs.ErrResourceExhausted.WithMessage("docker address pools exhausted")
	// ErrUnavailable: the engine did not answer (narrower than its class: a 503
	// is an answer).
	ErrUnavailable = errdefs.ErrUnavailable.WithMessage("docker engine unavailable")
	// ErrForeignObject: a container, network or volume the lease's launch needs by
	// name belongs to another installation (or to nobody berth knows). It is never
	// adopted, recreated or removed; the launch fails naming it.
	ErrForeignObject = errdefs.ErrPermissionDenied.WithMessage("docker object belongs to another installation")
	// ErrForeignNetwork is the ErrForeignObject of a lease network: errors.Is
	// matches both.
	ErrForeignNetwork = fmt.Errorf("network name taken by a foreign network: %w", ErrForeignObject)
	// ErrPoolNetworkGone: the warm-pool network a launch was to attach to is
	// gone; nothing of the launch is left. It is errdefs.IsNotFound.
	ErrPoolNetworkGone = fmt.Errorf("pool network gone: %w", errdefs.ErrNotFound)
	// ErrBridgeNotIsolated: a single-container lease was to launch on Docker's
	// default bridge, but the daemon no longer isolates its containers there
	// (inter-container communication is on): a tenant is never started on a
	// network it shares with other tenants. Definite until the operator sets
	// "icc": false again.
	ErrBridgeNotIsolated = errdefs.ErrFailedPrecondition.WithMessage(`docker's default bridge no longer isolates containers (set "icc": false in daemon.json)`)
	// ErrImageNotAdmissible: the image's metadata breaks an admission limit (VOLUME
	// targets, label count or size, a reserved label, the lease mount budget); it
	// can never be launched here. The tenant rules' own (messages/policy).
	ErrImageNotAdmissible = policy.ErrImageNotAdmissible
)

// ProjectName is the Compose project (and network name) of a lease.
func ProjectName(lease string) string { return "fred-" + lease }

// Plan is everything needed to launch one provision attempt of a lease as a
// Compose project. It is built by the lease actor from the frozen lease spec.
type Plan struct {
	Lease          string
	Tenant         string
	ProviderUUID   string
	BackendName    string
	InstallationID string
	OperationID    string
	MaintenanceID  string // fred.maintenance_id: set on a restart/update target cohort, "" for a provision
	Generation     uint64
	FailCount      int
	CallbackURL    string
	LifecycleURL   string
	NetworkID      string // verified lease network, attached as external by ID
	NetworkPooled  bool   // NetworkID is a warm-pool network bound to the lease (netpool journal), not fred-<lease>
	// NetworkName is NetworkID's name (fred-<lease>, or berth-pool-… for a pool
	// network): traefik.docker.network must name the network the container is
	// really on. "" lets the engine ask Docker.
	NetworkName string
	// NetworkBridged: the lease's one container runs on Docker's default bridge
	// (network_mode: bridge, no aliases), which the daemon isolates (icc=false);
	// NetworkID is that network's ID and NetworkName "bridge".
	NetworkBridged bool
	Ingress        *ingress.Config // the ingress.* keys the labels need; nil: ingress off
	HostBindIP     string
	ReadonlyRootfs bool
	PidsLimit      int64
	TmpfsSizeMB    int
	// Contract is the runtime contract the containers are created under: 0 is
	// RuntimeContract; an older one only in tests (leases from before a bump).
	Contract int
	Services []ServicePlan // sorted by Name
}

// ServicePlan is one tenant service, fanned out to Quantity instances: the
// service as admitted, and what the host decided for it.
type ServicePlan struct {
	// Service is the tenant's service as admitted (image reference, env,
	// command, ports, health check, …): the Compose rendering reads the
	// tenant's knobs from it, so a new knob is not copied through here.
	manifest.Service
	Name         string
	SKU          string
	Quantity     int
	CPUCores     float64
	MemoryMB     int64
	DiskMB       int64  // 0 = diskless: image VOLUMEs become tmpfs
	ImageID      string // resolved sha256 ID after pull/inspect
	ImageVolumes []string
	MaskLabels   []string // the Compose build stamps the image carries: their values are discarded
	// VolumeDirs are, for a stateful service (DiskMB > 0), the host directory of each
	// instance's managed volume (index i → VolumeDirs[i]); each image VOLUME target
	// is bind-mounted from its subdirectory VolumeSubdir(target).
	VolumeDirs   []string
	CustomDomain string // the custom domain whose DNS gate opened: its router is added; "" none
	// UID and GID are the numeric user the container runs as (User, else the
	// image's USER): every tmpfs mount point belongs to it. Up resolves them
	// through the image when both are 0.
	UID, GID int
	// WritablePaths are the image's detected writable paths
	// (Engine.DetectWritablePaths). Under a read-only rootfs each is mounted
	// writable: from <WritableDirs[i]>/_wp/<VolumeSubdir(target)>, seeded by
	// Engine.SeedWritablePaths, when WritableDirs is set; else as an empty
	// tmpfs owned by UID:GID (Docker 20.10 copies no image content into a
	// tmpfs). Not mounted when the rootfs is writable.
	WritablePaths []string
	// WritableDirs are, per instance, the directory holding its seeded _wp
	// tree: the managed volume of a stateful instance (VolumeDirs[i]), the
	// scratch volume (ScratchVolumeName) of a diskless one. Empty: tmpfs.
	WritableDirs []string
	// FQDNs are the instances' pinned names by index ("" or absent: berthd's
	// scheme) — a lease taken over from fred v0.13 keeps fred's.
	FQDNs []string
}

// ServicePorts are a manifest service's ports in order, each published on
// HostBindIP with an ephemeral host port, and its ingress port (0: none marked).
func ServicePorts(m *manifest.Service) (ports []ingress.Port, ingressPort int) {
	for key := range m.Ports {
		if p, ok := parsePort(key); ok {
			ports = append(ports, p)
		}
	}
	slices.SortFunc(ports, func(a, b ingress.Port) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), strings.Compare(a.Protocol, b.Protocol))
	})
	if key, ok := m.IngressPort(); ok {
		p, _ := parsePort(key)
		ingressPort = p.Number
	}
	return ports, ingressPort
}

// parsePort splits a canonical "8080/tcp" key.
func parsePort(key string) (ingress.Port, bool) {
	num, proto, ok := strings.Cut(key, "/")
	if !ok {
		proto = "tcp"
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return ingress.Port{}, false
	}
	return ingress.Port{Number: n, Protocol: proto}, true
}

// InstanceKey names one container of a lease.
type InstanceKey struct {
	Service string
	Index   int
}

// ComposeKeys is the exact key map: Compose service key → instance. A service of
// quantity 1 keeps its name; quantity n > 1 becomes <name>-0 … <name>-(n-1).
func ComposeKeys(services []ServicePlan) map[string]InstanceKey {
	keys := make(map[string]InstanceKey)
	for _, s := range services {
		if s.Quantity == 1 {
			keys[s.Name] = InstanceKey{Service: s.Name, Index: 0}
			continue
		}
		for i := 0; i < s.Quantity; i++ {
			keys[composeKey(s.Name, i)] = InstanceKey{Service: s.Name, Index: i}
		}
	}
	return keys
}

func composeKey(name string, i int) string { return name + "-" + strconv.Itoa(i) }

// SortContainers orders containers by lease, service, instance index, then ID:
// the order Cohort and ListManaged return.
func SortContainers(cs []messages.Container) {
	slices.SortFunc(cs, func(a, b messages.Container) int {
		return cmp.Or(strings.Compare(a.Lease, b.Lease), strings.Compare(a.Service, b.Service),
			cmp.Compare(a.Index, b.Index), strings.Compare(a.ID, b.ID))
	})
}

// ImageInfo is an admitted image: the exact content a lease runs.
type ImageInfo struct {
	ID      string   // sha256:… content ID the containers are created from
	Digest  string   // repository@sha256:… the reference resolved to through its registry
	Volumes []string // declared VOLUME paths, sorted and admitted
	User    string
	// MaskLabels are the four Compose build stamps (com.docker.compose.project,
	// .service, .version, .image.builder) the image carries: Compose and berth
	// write their own values, so the image's are discarded. Any other label of
	// the reserved fred., traefik. and com.docker.compose. namespaces makes the
	// image not admissible.
	MaskLabels []string
	// UID and GID are the numeric owner the image's user runs as (resolved from a
	// name through the image's own /etc/passwd and /etc/group); a volume's mount
	// points are given to them. 0/0 for root or no user.
	UID, GID int
}

// Pin records exactly what a reference resolved to, so every later launch of the
// same lease (retry, re-provision, restart, compensation) runs that content and
// never resolves the tag again.
func (i ImageInfo) Pin(ref string) messages.ImagePin {
	return messages.ImagePin{Ref: ref, ID: i.ID, Digest: i.Digest}
}

// NetworkSpec asks for the lease network fred-<lease>.
type NetworkSpec struct {
	Lease          string
	Tenant         string
	BackendName    string
	InstallationID string
	// Recheck: an earlier attempt — maybe of a process since killed, whose create
	// dockerd may still be carrying out — could be creating this network too, so a
	// successful create is followed by looking the name up until two looks agree.
	Recheck bool
}

// Network is a managed network as Docker reports it.
type Network struct {
	ID         string
	Name       string
	Labels     map[string]string
	Containers int // attached containers
	// Bridged: not a lease network but Docker's isolated default bridge, the
	// netpool's answer for a single-container lease.
	Bridged bool
}

// DefaultBridgeName is the name of Docker's default bridge network (docker0).
const DefaultBridgeName = "bridge"

// BridgeFacts are what berth needs to know of Docker's default bridge before
// putting single-container leases on it.
type BridgeFacts struct {
	ID     string
	Subnet string // IPv4, CIDR
	// Isolated: the daemon drops traffic between containers on it ("icc":
	// false) and bridged traffic passes iptables (br_netfilter's
	// bridge-nf-call-iptables is on), so a container reaches no other.
	Isolated bool
	Reason   string // why not Isolated ("" when it is)
	// Capacity is how many of this installation's containers fit: the
	// subnet's usable host addresses less a small reserve and those attached
	// now that are not its own (its own are its bridged leases, which the
	// netpool counts from its journal).
	Capacity int
}

// Event is one container event from Docker's stream.
type Event struct {
	Action      string // start | die | kill | oom
	ContainerID string
	Lease       string
	Service     string
	Index       int
	Generation  uint64
	ExitCode    int
	At          time.Time
}

// DownOptions tune teardown.
type DownOptions struct {
	StopTimeout time.Duration
	// RemoveVolumes is a no-op, kept so callers compile: a stateful instance's
	// data is a host volume (Volumes), destroyed through Volumes.Destroy once its
	// containers are gone, never by Down.
	//
	// Deprecated: Down never removes data; use Volumes.Destroy.
	RemoveVolumes bool
}

// MaxVolumeEntries bounds what Entries reads of a volume's top: berth makes one
// subdirectory per image VOLUME (at most 16) and the writable-path tree, and
// no container mounts the top itself.
const MaxVolumeEntries = 1024

// ErrVolumeBusy: a managed volume cannot be destroyed right now (a process holds a
// file or the subvolume open, a mount is still attached); retry later — a held
// deletion, never a forgotten one. It is errdefs.IsConflict, as Docker's own
// "volume in use" is.
var ErrVolumeBusy = errdefs.ErrConflict.WithMessage("managed volume busy")

// ErrVolumeRootUnproven: the volume root is not, right now, the filesystem and
// directory berthd opened at start (unmounted, another filesystem mounted there,
// the directory or its installation marker replaced), so no volume operation
// runs: on the wrong directory a destroy finds "no entry" and would report data
// destroyed that still sits on the real disk. Retry later — the operation is
// held, never done and never failed. It is errdefs.IsUnavailable.
var ErrVolumeRootUnproven = errdefs.ErrUnavailable.WithMessage("volume root unproven")

// VolumeSubdir is the subdirectory of an instance volume that image VOLUME target
// is bind-mounted from ("/data" → "data"; escaping keeps distinct targets distinct).
func VolumeSubdir(target string) string {
	return url.QueryEscape(strings.TrimPrefix(target, "/"))
}

// Volumes is the host side of tenant data: one directory per instance of a
// stateful service under volume_data_path, bounded by a kernel quota where the
// filesystem enforces one (btrfs: a subvolume with a qgroup limit; dir: plain
// directories, no enforcement — development only). Names are the managed
// grammar above; a name never establishes ownership (the journal does), so
// nothing here is ever destroyed because of what it is called. Every method
// honours ctx's deadline.
type Volumes interface {
	Kind() string   // "btrfs" | "dir"
	Enforced() bool // the kernel enforces the quota
	Root() string   // volume_data_path
	// Ensure makes the volume exist (reusing one that does, its quota updated) with
	// a quota of quotaMB and the given subdirectories, whose mount points — only
	// they, never existing content — are owned by uid:gid. It returns the
	// volume's host path.
	Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error)
	// SetQuota changes the volume's quota (restore promote/demote).
	SetQuota(ctx context.Context, name string, quotaMB int64) error
	// Usage is the bytes the volume holds (what a demote must fit).
	Usage(ctx context.Context, name string) (int64, error)
	// Rename moves a volume to a new name (retention, restore, re-quarantine);
	// ErrNotFound when from does not exist, an error when to already does.
	Rename(ctx context.Context, from, to string) error
	// Destroy removes the volume and its data; an absent volume is success;
	// ErrVolumeBusy when it cannot be removed now.
	Destroy(ctx context.Context, name string) error
	// Exists reports whether the volume exists.
	Exists(ctx context.Context, name string) (bool, error)
	// Entries lists the entries at the top of the volume (never below it):
	// what a retaining close judges the volume by (WritablePathOnly). Absent
	// is ErrNotFound; a top of more than MaxVolumeEntries entries is an error.
	Entries(ctx context.Context, name string) ([]VolumeEntry, error)
	// Unnest moves fred v0.13's nested layout of the given image VOLUME targets
	// onto berthd's (VolumeSubdir), idempotently (volumes/unnest.go).
	Unnest(ctx context.Context, name string, targets []string) error
	// List names every entry under the root that has the managed prefix "fred-".
	List(ctx context.Context) ([]string, error)
}

// An engine (dockerio/engine; the in-memory dockerio/dockertest/fake for unit tests) is
// built for an installation ID, and every call that lists, attributes, changes
// or removes an object is scoped to objects carrying that installation's
// fred.installation_id label: an object of another installation is never
// adopted, recreated, stopped or removed. Every call honours ctx's deadline.
// There is no Engine interface: each actor declares the few calls it makes
// (reclaimer.Docker, watcher.Docker, reconciler.Docker, netpool.Docker, the
// lease steps' ImagesAPI, NetworksAPI and ContainersAPI, refresh.Lister).

// StoredImage is one image of Docker's store as the image collector sees it.
type StoredImage struct {
	ID          string
	RepoTags    []string // repo:tag names; berth never tags, so any is someone else's
	RepoDigests []string // repo@digest names it was pulled by
	Size        int64
	Created     time.Time
}

// LeaseResidue is what Docker holds of one lease (Engine.LeaseResidue).
type LeaseResidue struct {
	Containers   []string // this installation's containers of the lease, any state, by name
	Networks     []string // this installation's lease networks, by name
	Unattributed int      // containers labelled with the lease that are not this installation's
}
