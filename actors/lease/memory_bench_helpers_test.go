package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// Fixtures of the idle-lease memory benchmark (memory_bench_test.go).

// memBenchImage is the image of every benchmark lease (never pulled: the leases are
// idle and Ready).
const memBenchImage = "127.0.0.1:5000/berth/workload:1"

// errNoDocker is what memRefusingEngine answers to everything.
var errNoDocker = errors.New("memory benchmark: no Docker")

// memRefusingEngine is an engine that refuses every call and counts them,
// so the benchmark can prove an idle Ready lease never touches Docker.
type memRefusingEngine struct{ calls atomic.Int64 }

var _ interface {
	steps.ImagesAPI
	steps.NetworksAPI
	steps.ContainersAPI
} = (*memRefusingEngine)(nil)

func (e *memRefusingEngine) refuse() error { e.calls.Add(1); return errNoDocker }

func (e *memRefusingEngine) Ping(context.Context) error { return e.refuse() }
func (e *memRefusingEngine) AdmitImage(context.Context, string) (dockerio.ImageInfo, error) {
	return dockerio.ImageInfo{}, e.refuse()
}
func (e *memRefusingEngine) ImageUser(context.Context, string, string) (int, int, error) {
	return 0, 0, e.refuse()
}
func (e *memRefusingEngine) AdmitPinned(context.Context, messages.ImagePin) (dockerio.ImageInfo, error) {
	return dockerio.ImageInfo{}, e.refuse()
}
func (e *memRefusingEngine) EnsureNetwork(context.Context, dockerio.NetworkSpec) (string, error) {
	return "", e.refuse()
}
func (e *memRefusingEngine) InspectNetwork(context.Context, string) (dockerio.Network, error) {
	return dockerio.Network{}, e.refuse()
}
func (e *memRefusingEngine) LeaseNetworks(context.Context) ([]dockerio.Network, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) RemoveNetwork(context.Context, string) error { return e.refuse() }
func (e *memRefusingEngine) CreatePoolNetwork(context.Context) (dockerio.Network, error) {
	return dockerio.Network{}, e.refuse()
}
func (e *memRefusingEngine) PoolNetworks(context.Context) ([]dockerio.Network, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) DefaultBridge(context.Context) (dockerio.BridgeFacts, error) {
	return dockerio.BridgeFacts{}, e.refuse()
}
func (e *memRefusingEngine) Up(context.Context, dockerio.Plan) error { return e.refuse() }
func (e *memRefusingEngine) Launch(context.Context, dockerio.Plan) ([]messages.Container, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) Launched(context.Context, string) ([]messages.Container, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) Cohort(context.Context, string) ([]messages.Container, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) Inspect(context.Context, string) (messages.Container, error) {
	return messages.Container{}, e.refuse()
}
func (e *memRefusingEngine) Down(context.Context, string, dockerio.DownOptions) error {
	return e.refuse()
}
func (e *memRefusingEngine) RemoveContainers(context.Context, []string) error { return e.refuse() }
func (e *memRefusingEngine) StopRemove(context.Context, string, time.Duration) error {
	return e.refuse()
}
func (e *memRefusingEngine) ListManaged(context.Context) ([]messages.Container, error) {
	return nil, e.refuse()
}
func (e *memRefusingEngine) Logs(context.Context, string, int, int) (string, bool, error) {
	return "", false, e.refuse()
}
func (e *memRefusingEngine) Events(context.Context) (<-chan dockerio.Event, <-chan error) {
	errs := make(chan error, 1)
	errs <- e.refuse()
	return nil, errs
}

func (e *memRefusingEngine) DetectWritablePaths(context.Context, dockerio.WritableQuery) (dockerio.Writable, error) {
	return dockerio.Writable{}, e.refuse()
}
func (e *memRefusingEngine) SeedWritablePaths(context.Context, dockerio.SeedRequest) error {
	return e.refuse()
}
func (e *memRefusingEngine) SeccompEnabled(context.Context) (bool, error) { return false, e.refuse() }
func (e *memRefusingEngine) SweepHelpers(context.Context) (int, error)    { return 0, e.refuse() }
func (e *memRefusingEngine) GuardIsolation(context.Context) (bool, error) { return false, e.refuse() }

// memBenchSpec is a one-service flat lease the way the registry's prepare() builds
// one from a POST /provision: every string and map freshly allocated, as a decoded
// request's are, so the Spec's whole footprint is the lease's own.
func memBenchSpec(id, operationID string, admission uint64, admittedAt time.Time) *lease.Spec {
	svc := &manifest.Service{
		Image: memBenchImage,
		Ports: map[string]manifest.Port{"8080/tcp": {Ingress: true}},
		Env: map[string]string{
			"PORT":      "8080",
			"GREETING":  "hello from berth",
			"LOG_LEVEL": "info",
		},
	}
	return &lease.Spec{
		Lease:        id,
		Tenant:       "fred1tenantqz8k3v7xw5m2n4p6r9s0t",
		ProviderUUID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
		Items:        []messages.LeaseItem{{SKU: "docker-small", Quantity: 1, ServiceName: manifest.DefaultService}},
		Services: []lease.ServiceSpec{{
			Name:     manifest.DefaultService,
			SKU:      "docker-small",
			Quantity: 1,
			Profile:  lease.Profile{CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024},
			Manifest: svc,
		}},
		Flat:         true,
		CallbackURL:  "https://providerd.example:8443/v1/callbacks?operation_id=" + operationID,
		LifecycleURL: "https://providerd.example:8443/v1/callbacks?lifecycle_id=" + operationID,
		OperationID:  operationID,
		Manifest:     []byte(memBenchManifest),
		Admission:    admission,
		AdmittedAt:   admittedAt,
	}
}

// memBenchManifest is the raw tenant manifest memBenchSpec parsed.
const memBenchManifest = `{"image":"` + memBenchImage + `","ports":{"8080/tcp":{"ingress":true}},` +
	`"env":{"PORT":"8080","GREETING":"hello from berth","LOG_LEVEL":"info"}}`
