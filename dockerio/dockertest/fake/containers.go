package fake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// Compose labels the real engine's containers carry; the fake sets the same.
const (
	composeProjectLabel = "com.docker.compose.project"
	composeServiceLabel = "com.docker.compose.service"
	composeOneoffLabel  = "com.docker.compose.oneoff"
)

// Exit codes Docker reports for a stop (SIGTERM) and a forced removal (SIGKILL).
const (
	exitStopped = 143
	exitKilled  = 137
)

type fakeContainer struct {
	c            messages.Container
	key          string // Compose service key
	networkID    string
	installation string
	healthCheck  bool // the service has an active health check
	healthPinned bool // SetHealth/PinHealth decided; no automatic transition
	logs         []string
}

func (c *fakeContainer) snapshot() messages.Container {
	out := c.c
	out.Labels = copyMap(c.c.Labels)
	out.Ports = copyMap(c.c.Ports)
	return out
}

// Up converges the lease's containers to plan, like compose up: an instance
// whose identity (operation, generation, image) is unchanged is kept (and
// started again if it stopped), any other is replaced; then instances start in
// depends_on order. A service_healthy dependency on an instance whose health was
// pinned to anything but healthy fails the launch, leaving its dependents
// created but not started, as Compose does. Orphans are left alone.
func (e *Engine) Up(ctx context.Context, plan dockerio.Plan) error {
	if err := e.enter(ctx, OpUp); err != nil {
		return err
	}
	name := dockerio.ProjectName(plan.Lease)
	inst, err := e.installation(plan.InstallationID)
	if err != nil {
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	plan.InstallationID = inst
	plan.Contract = cmp.Or(plan.Contract, e.opts.Contract)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.failNextUp; err != nil {
		e.failNextUp = nil
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	order, err := e.verifyNetworkLocked(&plan)
	if err != nil {
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	// Like the real engine: a project holding any container that is not ours
	// fails the launch before anything is created, and the foreign object is
	// left alone.
	for _, c := range e.byProject[name] {
		if !e.ours(c.c.Labels) {
			return fmt.Errorf("compose up %s: container %s (%s, installation %q): %w", name, c.c.Name, c.c.ID,
				c.c.Labels[dockerio.LabelInstallation], dockerio.ErrForeignObject)
		}
	}

	now := e.now()
	byKey := map[string]*fakeContainer{}
	for _, svc := range plan.Services {
		for i := 0; i < svc.Quantity; i++ {
			key := composeKeyOf(svc, i)
			old := e.instanceLocked(plan.Lease, key)
			if old != nil && sameIdentity(old, plan, svc) {
				byKey[key] = old
				continue
			}
			if old != nil {
				e.stopAndRemoveLocked(old, exitStopped)
			}
			byKey[key] = e.createLocked(plan, svc, key, i, now)
		}
	}

	if err := e.refuseStart; err != nil {
		// The daemon refuses the first start; Compose starts nothing after it.
		e.refuseStart = nil
		for _, svcName := range order {
			if c := byKey[composeKeyOf(serviceNamed(plan, svcName), 0)]; c != nil && !isUp(c.c.State) {
				c.c.StartRefused = true
				break
			}
		}
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	for _, svcName := range order {
		svc := serviceNamed(plan, svcName)
		for i := 0; i < svc.Quantity; i++ {
			c := byKey[composeKeyOf(svc, i)]
			if isUp(c.c.State) {
				continue
			}
			if err := e.dependenciesMetLocked(plan, svc, byKey); err != nil {
				return fmt.Errorf("compose up %s: %w", name, err)
			}
			e.startLocked(c)
		}
	}
	return nil
}

// verifyNetworkLocked names plan's network (its claim may not carry the name),
// validates the plan, and checks the network is the lease's own or an owned pool
// network, as the real engine does before creating anything.
func (e *Engine) verifyNetworkLocked(plan *dockerio.Plan) ([]string, error) {
	if plan.NetworkBridged {
		return e.verifyBridgeLocked(plan)
	}
	n, ok := e.networks[plan.NetworkID]
	if ok && plan.NetworkName == "" {
		plan.NetworkName = n.name
	}
	order, err := validatePlan(*plan)
	if err != nil {
		return nil, err
	}
	if plan.NetworkPooled && (!ok || !labels.OwnedPoolNetwork(n.name, n.labels, plan.BackendName, plan.InstallationID)) {
		return nil, fmt.Errorf("verify pool network: %w", dockerio.ErrPoolNetworkGone)
	}
	if !ok {
		return nil, fmt.Errorf("verify lease network: %w", errdefs.ErrNotFound)
	}
	owner := labels.NetworkOwnership(dockerio.NetworkSpec{Lease: plan.Lease, BackendName: plan.BackendName, InstallationID: plan.InstallationID})
	if !plan.NetworkPooled && !labels.HasAll(n.labels, owner) {
		return nil, fmt.Errorf("verify lease network: %w", dockerio.ErrForeignNetwork)
	}
	return order, nil
}

// validatePlan checks what Compose would refuse and returns the services in an
// order that starts dependencies first.
func validatePlan(plan dockerio.Plan) ([]string, error) {
	if plan.Lease == "" || plan.NetworkID == "" || len(plan.Services) == 0 {
		return nil, fmt.Errorf("plan: lease, network ID and services are required")
	}
	if err := dockerio.CheckMountBudget(plan); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := labels.CheckIngress(plan); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, s := range plan.Services {
		if known[s.Name] {
			return nil, fmt.Errorf("plan: service %q listed twice", s.Name)
		}
		known[s.Name] = true
		// The real engine also requires each volume directory to exist on the
		// host; the fake touches no filesystem.
		if err := dockerio.CheckService(s); err != nil {
			return nil, err
		}
	}
	for _, s := range plan.Services {
		for target, dep := range s.DependsOn {
			if !known[target] {
				return nil, fmt.Errorf("plan: service %q depends on unknown service %q", s.Name, target)
			}
			if dep.Condition != manifest.ConditionStarted && dep.Condition != manifest.ConditionHealthy {
				return nil, fmt.Errorf("plan: service %q: unsupported depends_on condition %q", s.Name, dep.Condition)
			}
		}
	}
	var order []string
	done := map[string]bool{}
	for len(order) < len(plan.Services) {
		progressed := false
		for _, s := range plan.Services {
			if done[s.Name] {
				continue
			}
			ready := true
			for target := range s.DependsOn {
				ready = ready && done[target]
			}
			if ready {
				done[s.Name] = true
				order = append(order, s.Name)
				progressed = true
			}
		}
		if !progressed {
			return nil, fmt.Errorf("plan: depends_on cycle")
		}
	}
	return order, nil
}

func serviceNamed(plan dockerio.Plan, name string) dockerio.ServicePlan {
	for _, s := range plan.Services {
		if s.Name == name {
			return s
		}
	}
	return dockerio.ServicePlan{}
}

func composeKeyOf(svc dockerio.ServicePlan, index int) string {
	if svc.Quantity == 1 {
		return svc.Name
	}
	return svc.Name + "-" + strconv.Itoa(index)
}

// instanceLocked is this installation's current container of the lease for a
// Compose key.
func (e *Engine) instanceLocked(lease, key string) *fakeContainer {
	var found *fakeContainer
	for _, c := range e.byLease[lease] {
		if e.ours(c.c.Labels) && c.key == key {
			if found == nil || c.c.ID > found.c.ID {
				found = c
			}
		}
	}
	return found
}

func sameIdentity(c *fakeContainer, plan dockerio.Plan, svc dockerio.ServicePlan) bool {
	l := c.c.Labels
	return l[dockerio.LabelOperationID] == plan.OperationID &&
		l[dockerio.LabelGeneration] == strconv.FormatUint(plan.Generation, 10) &&
		l[dockerio.LabelImageID] == svc.ImageID && l[dockerio.LabelImageRef] == svc.Image &&
		l[ingress.LabelCustomDomain] == customDomainLabel(plan, svc)
}

// customDomainLabel is the fred.custom_domain an instance of svc carries: a
// change recreates it, as Compose's config hash does on the real engine.
func customDomainLabel(plan dockerio.Plan, svc dockerio.ServicePlan) string {
	l, _ := labels.Ingress(plan, svc, 0)
	return l[ingress.LabelCustomDomain]
}

func (e *Engine) createLocked(plan dockerio.Plan, svc dockerio.ServicePlan, key string, index int, now time.Time) *fakeContainer {
	l := labels.Container(plan, svc, index, now)
	l[composeProjectLabel] = dockerio.ProjectName(plan.Lease)
	l[composeServiceLabel] = key
	l[composeOneoffLabel] = "False"
	imageID := svc.ImageID
	id := randomHex(32)
	c := &fakeContainer{
		key:          key,
		networkID:    plan.NetworkID,
		installation: plan.InstallationID,
		healthCheck:  svc.HealthCheck.Active(),
		c: messages.Container{
			ID:          id,
			Name:        dockerio.ProjectName(plan.Lease) + "-" + key + "-1",
			Lease:       plan.Lease,
			Service:     svc.Name,
			Index:       index,
			OperationID: plan.OperationID,
			Generation:  plan.Generation,
			Image:       svc.Image,
			ImageID:     imageID,
			State:       "created",
			Ports:       map[string]messages.PortBinding{},
			Labels:      l,
			Contract:    dockerio.ContractOf(plan),
		},
	}
	if plan.NetworkID != "" && !plan.NetworkBridged { // the isolated bridge shares nothing (as the engine lists it)
		c.c.Networks = []string{plan.NetworkID}
	}
	ports, _ := dockerio.ServicePorts(&svc.Service)
	for _, p := range ports {
		c.c.Ports[strconv.Itoa(p.Number)+"/"+p.Protocol] = messages.PortBinding{HostIP: plan.HostBindIP, HostPort: strconv.Itoa(e.nextPort)}
		e.nextPort++
	}
	if h, ok := e.pinned[plan.Lease+"/"+svc.Name]; ok {
		c.healthPinned = true
		c.c.Health = h
	}
	e.addContainerLocked(c)
	return c
}

// addContainerLocked stores c and indexes it.
func (e *Engine) addContainerLocked(c *fakeContainer) {
	e.containers[c.c.ID] = c
	index(e.byProject, c.c.Labels[composeProjectLabel], c.c.ID, c)
	index(e.byLease, c.c.Labels[dockerio.LabelLease], c.c.ID, c)
	index(e.byNetwork, c.networkID, c.c.ID, c)
}

// removeContainerLocked forgets c and its index entries.
func (e *Engine) removeContainerLocked(c *fakeContainer) {
	delete(e.containers, c.c.ID)
	unindex(e.byProject, c.c.Labels[composeProjectLabel], c.c.ID)
	unindex(e.byLease, c.c.Labels[dockerio.LabelLease], c.c.ID)
	unindex(e.byNetwork, c.networkID, c.c.ID)
}

func index[T any](idx map[string]map[string]T, key, id string, v T) {
	m := idx[key]
	if m == nil {
		m = map[string]T{}
		idx[key] = m
	}
	m[id] = v
}

func unindex[T any](idx map[string]map[string]T, key, id string) {
	if m := idx[key]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(idx, key)
		}
	}
}

// dependenciesMetLocked is Compose's wait for depends_on, decided at once: a
// started dependency must be up; a healthy one must not be pinned unhealthy.
func (e *Engine) dependenciesMetLocked(plan dockerio.Plan, svc dockerio.ServicePlan, byKey map[string]*fakeContainer) error {
	for target, d := range svc.DependsOn {
		t := serviceNamed(plan, target)
		for i := 0; i < t.Quantity; i++ {
			dep := byKey[composeKeyOf(t, i)]
			if !isUp(dep.c.State) {
				return fmt.Errorf("dependency failed to start: container %s exited (%d)", dep.c.Name, dep.c.ExitCode)
			}
			if d.Condition != manifest.ConditionHealthy {
				continue
			}
			if !dep.healthCheck {
				return fmt.Errorf("dependency failed to start: container %s has no healthcheck configured", dep.c.Name)
			}
			if dep.healthPinned && dep.c.Health != "healthy" {
				return fmt.Errorf("dependency failed to start: container %s is unhealthy", dep.c.Name)
			}
		}
	}
	return nil
}

func (e *Engine) startLocked(c *fakeContainer) {
	c.c.State = "running"
	c.c.StartedAt = e.now()
	c.c.FinishedAt = time.Time{}
	c.c.ExitCode = 0
	c.c.OOMKilled = false
	if c.healthCheck && !c.healthPinned {
		c.c.Health = "starting"
		time.AfterFunc(e.opts.HealthyAfter, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.containers[c.c.ID] == c && c.c.State == "running" && !c.healthPinned && c.c.Health == "starting" {
				c.c.Health = "healthy"
			}
		})
	}
	e.emitLocked(c, "start")
}

// stopLocked ends a running container with exitCode, emitting kill then die.
func (e *Engine) stopLocked(c *fakeContainer, exitCode int, oom bool) {
	if !isUp(c.c.State) {
		return
	}
	if oom {
		e.emitLocked(c, "oom")
	}
	e.emitLocked(c, "kill")
	c.c.State = "exited"
	c.c.ExitCode = exitCode
	c.c.OOMKilled = oom
	c.c.FinishedAt = e.now()
	e.emitLocked(c, "die")
}

func (e *Engine) stopAndRemoveLocked(c *fakeContainer, exitCode int) {
	e.stopLocked(c, exitCode, false)
	e.removeContainerLocked(c)
}

// Cohort is this installation's containers of the lease's project, attributed
// through their Compose key, sorted by (Service, Index, ID).
func (e *Engine) Cohort(ctx context.Context, lease string) ([]messages.Container, error) {
	if err := e.enter(ctx, OpCohort); err != nil {
		return nil, err
	}
	return e.cohortOf(lease)
}

func (e *Engine) cohortOf(lease string) ([]messages.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []messages.Container
	for _, c := range e.byProject[dockerio.ProjectName(lease)] {
		if !e.ours(c.c.Labels) {
			continue
		}
		inst, ok := labels.ParseInstance(c.c.Labels)
		if !ok || inst.Lease != lease || !labels.AgreesWithComposeKey(c.key, inst.Service, inst.Index) {
			continue
		}
		out = append(out, c.snapshot())
	}
	dockerio.SortContainers(out)
	return out, nil
}

// Launch is Up, then Launched (both counted, as their own ops).
func (e *Engine) Launch(ctx context.Context, plan dockerio.Plan) ([]messages.Container, error) {
	if err := e.Up(ctx, plan); err != nil {
		return nil, err
	}
	return e.Launched(ctx, plan.Lease)
}

// Launched is Cohort as one listing reports it: no exit code, start time or ports.
func (e *Engine) Launched(ctx context.Context, lease string) ([]messages.Container, error) {
	if err := e.enter(ctx, OpLaunched); err != nil {
		return nil, err
	}
	cohort, err := e.cohortOf(lease)
	for i := range cohort {
		c := &cohort[i]
		c.ExitCode, c.OOMKilled, c.StartedAt, c.FinishedAt, c.Ports = 0, false, time.Time{}, time.Time{}, nil
	}
	return cohort, err
}

// Inspect reports one container; errdefs.ErrNotFound when absent.
func (e *Engine) Inspect(ctx context.Context, id string) (messages.Container, error) {
	return inspect(ctx, e, OpInspect, "container", id, e.containers, (*fakeContainer).snapshot)
}

// Down removes this installation's containers of the lease (stopping running
// ones: kill + die with exit 143). Another installation's objects of the same
// lease UUID are left alone. Networks stay; data (host volumes) is never
// touched, so opts.RemoveVolumes is a no-op as in the real engine.
func (e *Engine) Down(ctx context.Context, lease string, opts dockerio.DownOptions) error {
	if err := e.enter(ctx, OpDown); err != nil {
		return err
	}
	if lease == "" {
		return fmt.Errorf("down: empty lease")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.byLease[lease] { // removing from the map being ranged over is safe
		if e.ours(c.c.Labels) {
			e.stopAndRemoveLocked(c, exitStopped)
		}
	}
	return nil
}

// RemoveContainers force-removes this installation's containers by ID (kill + die
// with exit 137 for running ones); absent IDs are success, another
// installation's container is refused (dockerio.ErrForeignObject) and the
// others still go.
func (e *Engine) RemoveContainers(ctx context.Context, ids []string) error {
	if err := e.enter(ctx, OpRemoveContainers); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, id := range ids {
		c, ok := e.containers[id]
		if !ok {
			continue
		}
		if !e.ours(c.c.Labels) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", id, dockerio.ErrForeignObject))
			continue
		}
		e.stopAndRemoveLocked(c, exitKilled)
	}
	return errors.Join(errs...)
}

// StopRemove stops and removes one of this installation's containers (kill +
// die with exit 0 for a running one, as after a graceful stop); absent IDs are
// success, another installation's container is refused.
func (e *Engine) StopRemove(ctx context.Context, id string, stopTimeout time.Duration) error {
	if err := e.enter(ctx, OpStopRemove); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.containers[id]
	if !ok {
		return nil
	}
	if !e.ours(c.c.Labels) {
		return fmt.Errorf("stop container %s: %w", id, dockerio.ErrForeignObject)
	}
	e.stopAndRemoveLocked(c, 0)
	return nil
}

// ListManaged lists the installation's managed containers as a Docker list call
// shows them: health only while running, no start/finish times.
func (e *Engine) ListManaged(ctx context.Context) ([]messages.Container, error) {
	installationID := e.opts.InstallationID
	if err := e.enter(ctx, OpListManaged); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []messages.Container
	for _, c := range e.containers {
		if c.c.Labels[dockerio.LabelManaged] != "true" || c.c.Labels[dockerio.LabelInstallation] != installationID {
			continue
		}
		s := c.snapshot()
		if s.State != "running" {
			s.Health = ""
		}
		s.StartedAt, s.FinishedAt, s.OOMKilled = time.Time{}, time.Time{}, false
		out = append(out, s)
	}
	dockerio.SortContainers(out)
	return out, nil
}

// --- container controls ---------------------------------------------------

// ErrUnknownContainer is returned by the controls for an ID the fake does not hold.
var ErrUnknownContainer = errors.New("fake: no such container")

// control runs f on the container id under the lock; an ID the fake does not
// hold is ErrUnknownContainer, said as "<doing> <id>".
func (e *Engine) control(doing, id string, f func(c *fakeContainer)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.containers[id]
	if !ok {
		return fmt.Errorf("%s %s: %w", doing, id, ErrUnknownContainer)
	}
	f(c)
	return nil
}

// Kill makes a running container exit with exitCode (events kill, die).
func (e *Engine) Kill(id string, exitCode int) error {
	return e.control("kill", id, func(c *fakeContainer) { e.stopLocked(c, exitCode, false) })
}

// OOMKill makes a running container die of OOM (events oom, kill, die; exit 137).
func (e *Engine) OOMKill(id string) error {
	return e.control("oom-kill", id, func(c *fakeContainer) { e.stopLocked(c, exitKilled, true) })
}

// SetHealth pins a container's health ("starting", "healthy", "unhealthy").
func (e *Engine) SetHealth(id, health string) error {
	return e.control("set health of", id, func(c *fakeContainer) { c.healthPinned, c.c.Health = true, health })
}

// PinHealth pins the health of the lease's service's containers created from
// now on (e.g. "unhealthy" to make a service_healthy dependency fail Up).
func (e *Engine) PinHealth(lease, service, health string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pinned[lease+"/"+service] = health
}

// AppendLogs adds output lines to a container's log.
func (e *Engine) AppendLogs(id string, lines ...string) error {
	return e.control("append logs of", id, func(c *fakeContainer) { c.logs = append(c.logs, lines...) })
}

// maxLogBytes mirrors the real engine's hard cap.
const maxLogBytes = 16 << 20

// Logs returns the last tail lines (100 when tail ≤ 0), keeping at most maxBytes
// (capped at 16 MiB) of the end, cut on a line boundary; truncated when cut.
func (e *Engine) Logs(ctx context.Context, id string, tail int, maxBytes int) (string, bool, error) {
	if err := e.enter(ctx, OpLogs); err != nil {
		return "", false, err
	}
	if maxBytes <= 0 || maxBytes > maxLogBytes {
		maxBytes = maxLogBytes
	}
	if tail <= 0 {
		tail = 100
	}
	e.mu.Lock()
	c, ok := e.containers[id]
	var lines []string
	foreign := ok && !e.ours(c.c.Labels)
	if ok {
		lines = c.logs[max(0, len(c.logs)-tail):]
	}
	e.mu.Unlock()
	if !ok {
		return "", false, fmt.Errorf("logs of %s: %w", id, errdefs.ErrNotFound)
	}
	if foreign {
		return "", false, fmt.Errorf("logs of %s: %w", id, dockerio.ErrForeignObject)
	}
	var kept []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if size+len(lines[i])+1 > maxBytes {
			return strings.Join(kept, ""), true, nil
		}
		kept = append([]string{lines[i] + "\n"}, kept...)
		size += len(lines[i]) + 1
	}
	return strings.Join(kept, ""), false, nil
}

// --- another installation's objects ---------------------------------------

// AddForeignContainer places a running container of another installation in the
// lease's Compose project, labelled exactly as that installation's berth would
// have labelled it (Compose key: the service name for index 0, <service>-<index>
// otherwise). Returns its ID. This fake's Up then fails with
// dockerio.ErrForeignObject, and nothing of this fake lists, removes or
// streams it.
func (e *Engine) AddForeignContainer(lease, service string, index int, installation string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	plan := dockerio.Plan{Lease: lease, Tenant: "foreign-tenant", BackendName: "docker", InstallationID: installation,
		OperationID: "foreign-op", Generation: 1}
	svc := dockerio.ServicePlan{Name: service, Quantity: index + 1}
	key := service
	if index > 0 {
		key = service + "-" + strconv.Itoa(index)
	}
	now := e.now()
	l := labels.Container(plan, svc, index, now)
	l[composeProjectLabel] = dockerio.ProjectName(lease)
	l[composeServiceLabel] = key
	l[composeOneoffLabel] = "False"
	id := randomHex(32)
	c := &fakeContainer{key: key, installation: installation, c: messages.Container{
		ID: id, Name: dockerio.ProjectName(lease) + "-" + key + "-1", Lease: lease, Service: service, Index: index,
		OperationID: plan.OperationID, Generation: 1, State: "created", Ports: map[string]messages.PortBinding{}, Labels: l,
	}}
	e.addContainerLocked(c)
	e.startLocked(c)
	return id
}

// LeaseResidue lists the fake's containers and lease networks of lease.
func (e *Engine) LeaseResidue(ctx context.Context, lease string) (dockerio.LeaseResidue, error) {
	ctrs, err := e.ListManaged(ctx)
	if err != nil {
		return dockerio.LeaseResidue{}, err
	}
	var r dockerio.LeaseResidue
	for _, c := range ctrs {
		if c.Lease == lease {
			r.Containers = append(r.Containers, c.Name)
		}
	}
	nets, err := e.LeaseNetworks(ctx)
	if err != nil {
		return dockerio.LeaseResidue{}, err
	}
	for _, n := range nets {
		if n.Labels[dockerio.LabelLease] == lease {
			r.Networks = append(r.Networks, n.Name)
		}
	}
	return r, nil
}
