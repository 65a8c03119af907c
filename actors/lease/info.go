package lease

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
)

// leaseInfo is GET /info of a ready lease: flattened instances in service-name
// order plus the per-service map. With ingress on, an instance's fqdn is its
// name under the wildcard domain (what its fred.fqdn label says) and a
// service's fqdn is its custom domain once its router is deployed.
func leaseInfo(spec *Spec, st *State, set *Settings) messages.LeaseInfo {
	info := messages.LeaseInfo{Host: set.HostAddress, Instances: []messages.Instance{}, Services: map[string]messages.ServiceInfo{}}
	services, byService := servicesRunning(spec, st)
	names := fqdns(set.Ingress, spec, services)
	for _, svc := range services { // sorted by name
		si := messages.ServiceInfo{Instances: []messages.Instance{}, FQDN: routedDomains(set.Ingress, st)[svc.Name]}
		for _, inst := range byService[svc.Name] {
			w := messages.Instance{InstanceIndex: inst.Index, ContainerID: shortID(inst.ContainerID),
				Image: inst.Image, Status: "running", Ports: inst.Ports.byKey()}
			if n := names[svc.Name]; inst.Index < len(n) {
				w.FQDN = n[inst.Index]
			}
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

// logsResponseCeiling leaves room for JSON escaping and keys under the 16 MiB
// body cap of a logs reply.
const logsResponseCeiling = 12 << 20

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// fqdns names every instance of the services with a routable TCP port (those
// the labels route to) under the wildcard domain, or by its pin; nil when
// ingress is off.
func fqdns(cfg *ingress.Config, spec *Spec, services []ServiceSpec) map[string][]string {
	if cfg == nil {
		return nil
	}
	quantities := map[string]int{}
	for _, svc := range services {
		ports, _ := dockerio.ServicePorts(svc.Manifest)
		if _, ok := ingress.SelectPort(ports, 0); ok {
			quantities[svc.Name] = svc.Quantity
		}
	}
	names, err := ingress.LeaseFQDNs(spec.Lease, quantities, cfg.WildcardDomain)
	if err != nil { // the launch refused such a plan: nothing is routed
		return nil
	}
	for svc, n := range names {
		for i, pin := range spec.pinnedFQDNs(svc, len(n)) {
			if pin != "" {
				n[i] = pin
			}
		}
	}
	return names
}

// routedDomains are the custom domains the running release routes, by service.
func routedDomains(cfg *ingress.Config, st *State) map[string]string {
	if r := st.Running(); cfg != nil && r != nil {
		return r.Domains
	}
	return nil
}

// provisionInfo is the lease's record for GET /provisions.
func provisionInfo(spec *Spec, st *State, cfg *ingress.Config) messages.ProvisionInfo {
	images := spec.ServiceImages()
	services := spec.Services
	if r := st.Running(); r != nil && len(r.Services) > 0 {
		images, services = serviceImages(r.Services), r.Services
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
		Items:          desiredItems(spec, st),
		ServiceImages:  images,
		TerminalBudget: st.Verdict(),
		FQDNs:          fqdns(cfg, spec, services),
		CustomDomains:  routedDomains(cfg, st),
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
			text = steps.LogUnavailable
		}
		out[key] = text
	}
	return messages.LogsReply{Logs: out}
}
