package lease

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/messages"
)

// leaseInfo is GET /info of a ready lease: flattened instances in service-name
// order plus the per-service map.
func leaseInfo(spec *Spec, st *State, host string) messages.LeaseInfo {
	info := messages.LeaseInfo{Host: host, Instances: []messages.Instance{}, Services: map[string]messages.ServiceInfo{}}
	services, byService := servicesRunning(spec, st)
	for _, svc := range services { // sorted by name
		si := messages.ServiceInfo{Instances: []messages.Instance{}}
		for _, inst := range byService[svc.Name] {
			w := messages.Instance{InstanceIndex: inst.Index, ContainerID: shortID(inst.ContainerID),
				Image: inst.Image, Status: "running", Ports: inst.Ports.byKey()}
			si.Instances = append(si.Instances, w)
			info.Instances = append(info.Instances, w)
		}
		info.Services[svc.Name] = si
	}
	return info
}

// servicesRunning is the running release's services (the spec's when it records
// none), and the state's instances of each in index order.
func servicesRunning(spec *Spec, st *State) ([]ServiceSpec, map[string][]Instance) {
	services := spec.Services
	if r := st.Running(); r != nil && len(r.Services) > 0 {
		services = r.Services
	}
	byService := make(map[string][]Instance)
	for _, inst := range st.Containers {
		byService[inst.Service] = append(byService[inst.Service], inst)
	}
	for _, insts := range byService {
		sort.Slice(insts, func(i, k int) bool { return insts[i].Index < insts[k].Index })
	}
	return services, byService
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
	if st.Reason != "" {
		info.LifecycleGeneration = st.Generation
	}
	if st.Status == Provisioning && spec.Restore != nil {
		info.Status = messages.StatusRestarting // a restore: the seed's Reserved → Restarting
	}
	return info
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
			cohort = append(cohort, messages.Container{ID: k.ContainerID, Service: k.Service, Index: k.Index})
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
