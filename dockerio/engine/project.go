package engine

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/api"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages/manifest"
)

// leaseNetworkKey is the Compose key of the one network every container joins.
const leaseNetworkKey = "lease"

// buildProject turns a plan into the in-memory Compose project of the lease: one
// Compose service per instance key of dockerio.ComposeKeys, each carrying every
// hardening setting, the SKU limits and the seed's fred.* labels. It is a pure
// function of its inputs, so a repeated Up of the same plan yields the same
// Compose config hashes and Compose leaves running containers alone.
func buildProject(plan dockerio.Plan, createdAt time.Time) (*types.Project, error) {
	if plan.Lease == "" || plan.NetworkID == "" {
		return nil, fmt.Errorf("plan: lease and network ID are required")
	}
	if len(plan.Services) == 0 {
		return nil, fmt.Errorf("plan: no services")
	}
	if err := dockerio.CheckMountBudget(plan); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := labels.CheckIngress(plan); err != nil {
		return nil, err
	}
	byName := make(map[string]dockerio.ServicePlan, len(plan.Services))
	for _, s := range plan.Services {
		if _, dup := byName[s.Name]; dup {
			return nil, fmt.Errorf("plan: service %q listed twice", s.Name)
		}
		byName[s.Name] = s
	}
	keys := dockerio.ComposeKeys(plan.Services)
	if plan.NetworkBridged && len(keys) != 1 {
		return nil, fmt.Errorf("plan: the default bridge carries single-container leases only (%d containers)", len(keys))
	}
	keysOf := make(map[string][]string) // service name → its instance keys, sorted
	for key, inst := range keys {
		keysOf[inst.Service] = append(keysOf[inst.Service], key)
	}
	for _, ks := range keysOf {
		slices.Sort(ks)
	}

	name := dockerio.ProjectName(plan.Lease)
	project := &types.Project{
		Name:       name,
		WorkingDir: "/",
		Services:   types.Services{},
	}
	if !plan.NetworkBridged {
		// External and named by the verified ID: Compose neither creates nor
		// removes it, and Docker resolves an exact ID before any name.
		project.Networks = types.Networks{leaseNetworkKey: {Name: plan.NetworkID, External: true}}
	}

	for key, inst := range keys {
		svc := byName[inst.Service]
		if err := dockerio.CheckService(svc); err != nil {
			return nil, err
		}
		sc := buildService(plan, svc, key, inst.Index, createdAt)
		for target, dep := range svc.DependsOn {
			targetKeys, ok := keysOf[target]
			if _, known := byName[target]; !known {
				return nil, fmt.Errorf("plan: service %q depends on unknown service %q", svc.Name, target)
			}
			if dep.Condition != types.ServiceConditionStarted && dep.Condition != types.ServiceConditionHealthy {
				return nil, fmt.Errorf("plan: service %q: unsupported depends_on condition %q", svc.Name, dep.Condition)
			}
			if !ok {
				continue // a quantity-0 target has no instances to wait for
			}
			if sc.DependsOn == nil {
				sc.DependsOn = types.DependsOnConfig{}
			}
			for _, tk := range targetKeys {
				sc.DependsOn[tk] = types.ServiceDependency{Condition: dep.Condition, Required: true}
			}
		}
		project.Services[key] = sc
	}
	return project, nil
}

// buildService is the Compose service of one instance.
func buildService(plan dockerio.Plan, svc dockerio.ServicePlan, key string, index int, createdAt time.Time) types.ServiceConfig {
	fred, custom := serviceLabels(plan, svc, key, index, createdAt)
	memBytes := types.UnitBytes(svc.MemoryMB * 1024 * 1024)
	sc := types.ServiceConfig{
		Name: key,
		// The exact content resolved before the launch; a tag here would run
		// whatever the local cache holds under it.
		Image:        svc.ImageID,
		PullPolicy:   types.PullPolicyNever, // images are pulled and pinned before Up
		Labels:       fred,
		CustomLabels: custom,
		CapDrop:      []string{"ALL"},
		SecurityOpt:  securityOpts(plan),
		ReadOnly:     plan.ReadonlyRootfs,
		PidsLimit:    plan.PidsLimit,
		MemLimit:     memBytes,
		MemSwapLimit: memBytes, // equal to the limit: no swap at all
		CPUS:         float32(svc.CPUCores),
		Restart:      types.RestartPolicyNo,
		Init:         svc.Init,
		User:         svc.User,
		HealthCheck:  healthCheck(svc.HealthCheck),
	}
	if plan.NetworkBridged {
		// The lease's one container on Docker's isolated default bridge: no
		// DNS there, no alias, nothing another lease could resolve.
		sc.NetworkMode = dockerio.DefaultBridgeName
	} else {
		sc.Networks = map[string]*types.ServiceNetworkConfig{
			// The bare service name is the in-lease DNS name: web reaches db, and
			// every fan-out instance answers to its service's name.
			leaseNetworkKey: {Aliases: []string{svc.Name}},
		}
	}
	sc.Volumes, sc.Tmpfs = buildMounts(plan, svc, index)
	if svc.StopGracePeriod > 0 {
		d := types.Duration(svc.StopGracePeriod.D())
		sc.StopGracePeriod = &d
	}
	if len(svc.Env) > 0 {
		sc.Environment = types.MappingWithEquals{}
		for k, v := range svc.Env {
			sc.Environment[k] = &v
		}
	}
	if len(svc.Command) > 0 {
		sc.Entrypoint = types.ShellCommand(slices.Clone(svc.Command))
	}
	if len(svc.Args) > 0 {
		sc.Command = types.ShellCommand(slices.Clone(svc.Args))
	}
	ports, _ := dockerio.ServicePorts(&svc.Service)
	for _, p := range ports {
		sc.Ports = append(sc.Ports, types.ServicePortConfig{
			Mode:     "ingress",
			HostIP:   plan.HostBindIP,
			Target:   uint32(p.Number),
			Protocol: p.Protocol,
			// Published empty: Docker picks an ephemeral host port.
		})
	}
	if len(svc.Expose) > 0 {
		sc.Expose = types.StringOrNumberList(slices.Clone(svc.Expose))
	}
	return sc
}

// securityOpts are a container's: the tenant seccomp profile from the contract
// that brought it on (an older one is Docker's default profile).
func securityOpts(plan dockerio.Plan) []string {
	if dockerio.ContractOf(plan) < dockerio.ContractSeccomp {
		return []string{"no-new-privileges:true"}
	}
	return []string{"no-new-privileges:true", tenantSeccompOpt()}
}

// serviceLabels are one instance's hashed labels (the seed's fred.* labels and
// the masks of reserved image labels) and Compose's own, unhashed ones.
func serviceLabels(plan dockerio.Plan, svc dockerio.ServicePlan, key string, index int, createdAt time.Time) (fred, custom types.Labels) {
	fred = types.Labels(labels.Container(plan, svc, index, createdAt))
	// created_at changes on every Up; keeping it out of the hashed labels keeps
	// Compose's config hash stable, so a repeated Up does not recreate anything.
	delete(fred, dockerio.LabelCreatedAt)
	custom = types.Labels{
		api.ProjectLabel:        dockerio.ProjectName(plan.Lease),
		api.ServiceLabel:        key,
		api.VersionLabel:        api.ComposeVersion,
		api.WorkingDirLabel:     "/",
		api.ConfigFilesLabel:    "",
		api.OneoffLabel:         "False",
		dockerio.LabelCreatedAt: createdAt.UTC().Format(time.RFC3339),
		api.ImageBuilderLabel:   "",
	}
	// Docker copies every image label the container does not set: an image
	// could otherwise inject fred.tenant or traefik.enable=true into a tenant
	// container. Set each reserved image label empty, unless berth or Compose
	// already writes that key.
	for _, k := range svc.MaskLabels {
		_, berthSets := fred[k]
		_, composeSets := custom[k]
		if !berthSets && !composeSets {
			fred[k] = ""
		}
	}
	return fred, custom
}

// instanceMounts lays out every filesystem mount of one instance, target →
// bind source ("" for a tmpfs): the read-only rootfs' /tmp and /run; the image
// VOLUMEs (when stateful, <VolumeDirs[index]>/<VolumeSubdir(target)>, the
// managed host volume whose quota the kernel enforces; when diskless, tmpfs: so
// no anonymous volume is ever created); under a read-only rootfs the writable
// paths (<WritableDirs[index]>/_wp/<VolumeSubdir(target)>, seeded, or tmpfs);
// the tenant's tmpfs mounts. A later layer wins on the same target (admission
// refused overlaps). buildProject checked the directories first.
func instanceMounts(plan dockerio.Plan, svc dockerio.ServicePlan, index int) map[string]string {
	m := map[string]string{}
	if plan.ReadonlyRootfs {
		m["/tmp"], m["/run"] = "", ""
	}
	for _, target := range svc.ImageVolumes {
		m[target] = ""
		if svc.DiskMB > 0 {
			m[target] = path.Join(svc.VolumeDirs[index], dockerio.VolumeSubdir(target))
		}
	}
	for _, target := range svc.WritablePaths {
		switch {
		case !plan.ReadonlyRootfs:
		case len(svc.WritableDirs) > 0:
			m[target] = path.Join(svc.WritableDirs[index], dockerio.WritableRoot, dockerio.VolumeSubdir(target))
		default:
			m[target] = ""
		}
	}
	for _, target := range svc.Tmpfs {
		m[target] = ""
	}
	return m
}

// buildMounts is one instance's mounts as Compose takes them, sorted by target
// for a stable hash: bind mounts, and tmpfs as "target:options" strings (Docker's
// HostConfig.Tmpfs: unlike a tmpfs mount it takes uid and gid, so each mount
// point belongs to the container's user — runc gives a tmpfs the mode of the
// image's directory and ignores mode=).
func buildMounts(plan dockerio.Plan, svc dockerio.ServicePlan, index int) ([]types.ServiceVolumeConfig, []string) {
	var opts []string
	if plan.TmpfsSizeMB > 0 {
		opts = append(opts, fmt.Sprintf("size=%dm", plan.TmpfsSizeMB))
	}
	if svc.UID != 0 || svc.GID != 0 {
		opts = append(opts, fmt.Sprintf("uid=%d", svc.UID), fmt.Sprintf("gid=%d", svc.GID))
	}
	suffix := ""
	if len(opts) > 0 {
		suffix = ":" + strings.Join(opts, ",")
	}
	m := instanceMounts(plan, svc, index)
	var binds []types.ServiceVolumeConfig
	var tmpfs []string
	for _, target := range slices.Sorted(maps.Keys(m)) {
		if m[target] == "" {
			tmpfs = append(tmpfs, target+suffix)
			continue
		}
		binds = append(binds, types.ServiceVolumeConfig{
			Type:   types.VolumeTypeBind,
			Source: m[target],
			Target: target,
			Bind: &types.ServiceVolumeBind{
				// Private: a mount made later inside the volume (none should be)
				// never propagates between the host and the container.
				Propagation: types.PropagationRPrivate,
				// Never created by Docker (it would be root-owned, outside the
				// quota's subvolume when the volume is missing): Up checked it.
				CreateHostPath: false,
			},
		})
	}
	return binds, tmpfs
}

// bindSources are the host directories the plan bind-mounts, in order.
func bindSources(plan dockerio.Plan) []string {
	var out []string
	for _, svc := range plan.Services {
		for i := range svc.Quantity {
			for _, src := range instanceMounts(plan, svc, i) {
				if src != "" {
					out = append(out, src)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// healthCheck maps the manifest check; nil keeps the image's own HEALTHCHECK,
// NONE disables it.
func healthCheck(h *manifest.HealthCheck) *types.HealthCheckConfig {
	if h == nil || len(h.Test) == 0 {
		return nil
	}
	if h.Test[0] == "NONE" {
		return &types.HealthCheckConfig{Test: types.HealthCheckTest{"NONE"}, Disable: true}
	}
	hc := &types.HealthCheckConfig{Test: types.HealthCheckTest(slices.Clone(h.Test))}
	dur := func(d manifest.Duration) *types.Duration {
		if d <= 0 {
			return nil
		}
		v := types.Duration(d.D())
		return &v
	}
	hc.Interval = dur(h.Interval)
	hc.Timeout = dur(h.Timeout)
	hc.StartPeriod = dur(h.StartPeriod)
	if h.Retries > 0 {
		r := uint64(h.Retries)
		hc.Retries = &r
	}
	return hc
}
