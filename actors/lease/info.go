package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// leaseInfo is GET /info of a ready lease: flattened instances in service-name
// order plus the per-service map.
func leaseInfo(spec *Spec, st *State, host string) messages.LeaseInfo {
	info := messages.LeaseInfo{Host: host, Instances: []messages.Instance{}, Services: map[string]messages.ServiceInfo{}}
	byService := make(map[string][]Instance)
	for _, inst := range st.Containers {
		byService[inst.Service] = append(byService[inst.Service], inst)
	}
	services := spec.Services
	if r := st.Running(); r != nil && len(r.Services) > 0 {
		services = r.Services
	}
	for _, svc := range services { // sorted by name
		insts := byService[svc.Name]
		sort.Slice(insts, func(i, k int) bool { return insts[i].Index < insts[k].Index })
		si := messages.ServiceInfo{Instances: []messages.Instance{}}
		for _, inst := range insts {
			w := messages.Instance{InstanceIndex: inst.Index, ContainerID: shortID(inst.ContainerID),
				Image: inst.Image, Status: "running", Ports: map[string]messages.PortBinding{}}
			for _, p := range inst.Ports {
				w.Ports[p.Key] = p.PortBinding
			}
			si.Instances = append(si.Instances, w)
			info.Instances = append(info.Instances, w)
		}
		info.Services[svc.Name] = si
	}
	return info
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// provisionInfo is the lease's record for GET /provisions.
func provisionInfo(spec *Spec, st *State) messages.ProvisionInfo {
	images := spec.ServiceImages()
	if r := st.Running(); r != nil && len(r.Services) > 0 {
		images = serviceImages(r.Services)
	}
	info := messages.ProvisionInfo{
		LeaseUUID:      spec.Lease,
		ProviderUUID:   spec.ProviderUUID,
		Status:         st.Status.Wire(),
		CreatedAt:      spec.AdmittedAt,
		FailCount:      st.FailCount,
		Reason:         st.Reason,
		Message:        st.Message,
		Tenant:         spec.Tenant,
		Quantity:       spec.Instances(),
		Items:          spec.Items,
		ServiceImages:  images,
		TerminalBudget: st.Verdict(),
	}
	if st.Status == Provisioning && spec.Restore != nil {
		info.Status = messages.StatusRestarting // a restore: the seed's Reserved → Restarting
	}
	return info
}

// Capture is one failure's diagnostics, kept in diagnostics.db (never on-chain,
// never in a callback): exit codes, OOM, health and a bounded log excerpt.
type Capture struct {
	Lease         string `json:"lease_uuid"`
	Kind          string `json:"kind,omitempty"` // provision | runtime | maintenance (absent in captures before it was recorded)
	OperationID   string `json:"operation_id"`
	MaintenanceID string `json:"maintenance_id,omitempty"`
	Release       int    `json:"release,omitempty"` // a failed maintenance target's release
	Stamp
	Cause
	FailCount  int                `json:"fail_count"`
	Containers []ContainerCapture `json:"containers"`
}

// ContainerCapture is one container of a failed attempt.
type ContainerCapture struct {
	Service     string `json:"service"`
	Index       int    `json:"index"`
	ContainerID string `json:"container_id"`
	State       string `json:"state"`
	Health      string `json:"health,omitempty"`
	ExitCode    int    `json:"exit_code"`
	OOMKilled   bool   `json:"oom_killed"`
	Logs        string `json:"logs"`
	Truncated   bool   `json:"truncated,omitempty"`
}

// Capture bounds: per container and per attempt.
const (
	captureTail         = 500
	captureBytesPerCtr  = 256 << 10
	captureBytesPerTry  = 4 << 20
	logUnavailable      = "<log unavailable>"
	logsResponseCeiling = 12 << 20 // leaves room for JSON escaping and keys under the 16 MiB body cap
)

// captureOf says which attempt a capture is of.
type captureOf struct {
	kind            string // provision | runtime | maintenance
	reason, message string
	generation      uint64
	release         int    // a maintenance target's release version (0: a provision or runtime failure)
	maintenance     string // its maintenance ID
}

// capture writes the attempt's diagnostics; a failure to write is logged, never fatal.
func (j *job) capture(ctx context.Context, of captureOf, cohort []dockerio.Container) {
	c := Capture{Lease: j.lease, Kind: of.kind, OperationID: j.launch.OperationID, MaintenanceID: of.maintenance, Release: of.release,
		Stamp: Stamp{of.generation, j.now()}, Cause: Cause{of.reason, of.message}, FailCount: j.launch.FailCount + 1}
	budget := captureBytesPerTry
	for _, ctr := range cohort {
		cc := ContainerCapture{Service: ctr.Service, Index: ctr.Index, ContainerID: ctr.ID, State: ctr.State,
			Health: ctr.Health, ExitCode: ctr.ExitCode, OOMKilled: ctr.OOMKilled}
		if full, err := j.eng.Inspect(ctx, ctr.ID); err == nil {
			cc.State, cc.Health, cc.ExitCode, cc.OOMKilled = full.State, full.Health, full.ExitCode, full.OOMKilled
		}
		limit := min(captureBytesPerCtr, budget)
		if limit > 0 {
			text, truncated, err := j.eng.Logs(ctx, ctr.ID, captureTail, limit)
			if err != nil {
				text = logUnavailable
			}
			cc.Logs, cc.Truncated = text, truncated
			budget -= len(text)
		} else {
			cc.Logs, cc.Truncated = "", true
		}
		c.Containers = append(c.Containers, cc)
	}
	blob, err := json.Marshal(c)
	if err != nil {
		return
	}
	if err := j.diag.Put(j.lease, c.At, blob); err != nil {
		j.log.Warn().Err(err).Msg("write diagnostics")
	}
}

// LatestCapture reads the newest diagnostics of a lease.
func LatestCapture(j interface {
	Latest(string) (json.RawMessage, bool, error)
}, lease string) (*Capture, error) {
	blob, ok, err := j.Latest(lease)
	if err != nil || !ok {
		return nil, err
	}
	var c Capture
	if err := json.Unmarshal(blob, &c); err != nil {
		return nil, fmt.Errorf("decode diagnostics of %s: %w", lease, err)
	}
	return &c, nil
}

// logs reads the last tail lines of every container of the lease, keyed
// "<service>/<index>", the whole body bounded by 16 MiB. With no container left
// (a failed attempt was cleaned up) it serves the stored capture instead. When
// the latest release is a maintenance target that failed and was compensated, its
// captured logs are added as "failed/<service>/<index>".
func (j *job) logs(tail int, known []Instance, failedRelease int) messages.LogsReply {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		j.log.Warn().Err(err).Msg("logs: list containers")
		cohort = nil
		for _, k := range known {
			cohort = append(cohort, dockerio.Container{ID: k.ContainerID, Service: k.Service, Index: k.Index})
		}
	}
	out := make(map[string]string)
	if failedRelease > 0 {
		if c, err := LatestCapture(j.diag, j.lease); err == nil && c != nil && c.Release == failedRelease {
			for _, cc := range c.Containers {
				out[fmt.Sprintf("failed/%s/%d", cc.Service, cc.Index)] = cc.Logs
			}
		}
	}
	if len(cohort) == 0 {
		if c, err := LatestCapture(j.diag, j.lease); err == nil && c != nil && c.Release == 0 {
			for _, cc := range c.Containers {
				out[fmt.Sprintf("%s/%d", cc.Service, cc.Index)] = cc.Logs
			}
		}
		return messages.LogsReply{Logs: out}
	}
	per := logsResponseCeiling / (len(cohort) + len(out))
	for _, c := range cohort {
		key := fmt.Sprintf("%s/%d", c.Service, c.Index)
		text, _, err := j.eng.Logs(ctx, c.ID, tail, per)
		if err != nil {
			j.log.Warn().Err(err).Str("container", shortID(c.ID)).Msg("read logs")
			text = logUnavailable
		}
		out[key] = text
	}
	return messages.LogsReply{Logs: out}
}
