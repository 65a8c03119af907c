package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/compose"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/manifest"
)

// These tests need no Docker: buildProject is a pure function.

func unitPlan(services ...dockerio.ServicePlan) dockerio.Plan {
	return dockerio.Plan{
		Lease: "11111111-2222-3333-4444-555555555555", Tenant: "t1", ProviderUUID: "p1", BackendName: "docker",
		InstallationID: "inst-1", OperationID: "op-1", Generation: 7, FailCount: 2,
		CallbackURL: "http://cb/x?operation_id=1", LifecycleURL: "http://cb/x?lifecycle_id=1",
		NetworkID: strings.Repeat("ab", 32), HostBindIP: "127.0.0.1", ReadonlyRootfs: true,
		PidsLimit: 256, TmpfsSizeMB: 64, Services: services,
	}
}

func unitService(name string, quantity int) dockerio.ServicePlan {
	return dockerio.ServicePlan{
		Name: name, SKU: "s", Quantity: quantity, CPUCores: 1.5, MemoryMB: 256,
		Service: manifest.Service{Image: "registry.example/app:1", Ports: map[string]manifest.Port{"80/tcp": {}, "5353/udp": {}}},
		ImageID: "sha256:" + strings.Repeat("c", 64),
	}
}

func TestBuildProject_FanOut_OneComposeServicePerInstanceKey_WithItsLabels(t *testing.T) {
	p, err := buildProject(unitPlan(unitService("db", 1), unitService("web", 3)), time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.ServiceNames(), []string{"db", "web-0", "web-1", "web-2"}; !slices.Equal(got, want) {
		t.Fatalf("compose services = %v, want %v", got, want)
	}
	for key, inst := range map[string][2]string{"db": {"db", "0"}, "web-0": {"web", "0"}, "web-2": {"web", "2"}} {
		s := p.Services[key]
		if s.Labels[dockerio.LabelService] != inst[0] || s.Labels[dockerio.LabelInstance] != inst[1] {
			t.Errorf("%s: labels service=%q index=%q, want %v", key, s.Labels[dockerio.LabelService], s.Labels[dockerio.LabelInstance], inst)
		}
		if s.CustomLabels["com.docker.compose.service"] != key || s.CustomLabels["com.docker.compose.project"] != "fred-"+unitPlan().Lease {
			t.Errorf("%s: compose labels %v", key, s.CustomLabels)
		}
		if s.CustomLabels[dockerio.LabelCreatedAt] != "2023-11-14T22:13:20Z" {
			t.Errorf("%s: created_at %q", key, s.CustomLabels[dockerio.LabelCreatedAt])
		}
		if s.Labels[dockerio.LabelGeneration] != "7" || s.Labels[dockerio.LabelFailCount] != "2" || s.Labels[dockerio.LabelInstallation] != "inst-1" {
			t.Errorf("%s: fred labels %v", key, s.Labels)
		}
		if s.Image != unitService("x", 1).ImageID || s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: image %q pull %q, want the resolved ID, never pulled", key, s.Image, s.PullPolicy)
		}
		if n := s.Networks[leaseNetworkKey]; n == nil || !slices.Equal(n.Aliases, []string{inst[0]}) || len(s.Networks) != 1 {
			t.Errorf("%s: networks %v, want only the lease network with alias %s", key, s.Networks, inst[0])
		}
	}
	if n := p.Networks[leaseNetworkKey]; !bool(n.External) || n.Name != unitPlan().NetworkID || len(p.Networks) != 1 {
		t.Errorf("project networks = %+v, want one external network named by the verified ID", p.Networks)
	}
}

func TestBuildProject_Hardening_OnEveryService(t *testing.T) {
	init := true
	svc := unitService("app", 1)
	svc.Init = &init
	svc.User = "1000:1000"
	svc.StopGracePeriod = manifest.Duration(15 * time.Second)
	svc.Env = map[string]string{"A": "1"}
	svc.Command = []string{"/bin/app"}
	svc.Args = []string{"--flag"}
	svc.Expose = []string{"9000"}
	p, err := buildProject(unitPlan(svc), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := p.Services["app"]
	if !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.CapAdd) != 0 || s.Privileged {
		t.Errorf("caps: drop %v add %v privileged %v", s.CapDrop, s.CapAdd, s.Privileged)
	}
	if !slices.Equal(s.SecurityOpt, []string{"no-new-privileges:true", tenantSeccompOpt()}) || !s.ReadOnly || s.PidsLimit != 256 {
		t.Errorf("security_opt %v read_only %v pids %d", s.SecurityOpt, s.ReadOnly, s.PidsLimit)
	}
	if s.MemLimit != 256<<20 || s.MemSwapLimit != s.MemLimit || s.CPUS != 1.5 || s.Restart != "no" {
		t.Errorf("mem %d swap %d cpus %v restart %q", s.MemLimit, s.MemSwapLimit, s.CPUS, s.Restart)
	}
	if s.Init == nil || !*s.Init || s.User != "1000:1000" || s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) != 15*time.Second {
		t.Errorf("init %v user %q grace %v", s.Init, s.User, s.StopGracePeriod)
	}
	if v := s.Environment["A"]; v == nil || *v != "1" {
		t.Errorf("env %v", s.Environment)
	}
	if !slices.Equal([]string(s.Entrypoint), []string{"/bin/app"}) || !slices.Equal([]string(s.Command), []string{"--flag"}) {
		t.Errorf("entrypoint %v command %v", s.Entrypoint, s.Command)
	}
	if len(s.Ports) != 2 || s.Ports[0].HostIP != "127.0.0.1" || s.Ports[0].Published != "" || s.Ports[1].Protocol != "udp" {
		t.Errorf("ports %+v, want both on 127.0.0.1 with ephemeral host ports", s.Ports)
	}
	if !slices.Equal([]string(s.Expose), []string{"9000"}) {
		t.Errorf("expose %v", s.Expose)
	}
}

func TestBuildProject_Mounts_DisklessTmpfsStatefulBindFromVolumeDirTenantTmpfs(t *testing.T) {
	diskless := unitService("cache", 1)
	diskless.ImageVolumes = []string{"/var/lib/b", "/data"}
	diskless.Tmpfs = []string{"/scratch"}
	stateful := unitService("db", 2)
	stateful.DiskMB = 1024
	stateful.ImageVolumes = []string{"/var/lib/db", "/data"}
	stateful.VolumeDirs = []string{"/vols/fred-L-db-0", "/vols/fred-L-db-1"}
	p, err := buildProject(unitPlan(diskless, stateful), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	describe := describeMounts
	if got, want := describe(p.Services["cache"]), []string{
		"tmpfs:/data@4", "tmpfs:/run@4", "tmpfs:/scratch@4", "tmpfs:/tmp@4", "tmpfs:/var/lib/b@4",
	}; !slices.Equal(got, want) {
		t.Errorf("diskless mounts = %v, want %v", got, want)
	}
	if got, want := describe(p.Services["db-1"]), []string{
		"bind:/data<-/vols/fred-L-db-1/data(rprivate,create=false,ro=false)", "tmpfs:/run@4", "tmpfs:/tmp@4",
		"bind:/var/lib/db<-/vols/fred-L-db-1/var%2Flib%2Fdb(rprivate,create=false,ro=false)",
	}; !slices.Equal(got, want) {
		t.Errorf("stateful mounts = %v, want %v", got, want)
	}
	if got := describe(p.Services["db-0"]); got[0] != "bind:/data<-/vols/fred-L-db-0/data(rprivate,create=false,ro=false)" {
		t.Errorf("instance 0 mounts its own volume: %v", got)
	}
	if len(p.Volumes) != 0 {
		t.Errorf("project declares Docker volumes %v: none are used", p.Volumes)
	}
	if got, want := bindSources(unitPlan(diskless, stateful)), []string{
		"/vols/fred-L-db-0/data", "/vols/fred-L-db-0/var%2Flib%2Fdb", "/vols/fred-L-db-1/data", "/vols/fred-L-db-1/var%2Flib%2Fdb",
	}; !slices.Equal(got, want) {
		t.Errorf("bindSources = %v, want %v", got, want)
	}
}

func TestBuildProject_WritableRootfs_NoTmpTmpfsButImageVolumesStillTmpfs(t *testing.T) {
	plan := unitPlan(unitService("app", 1))
	plan.ReadonlyRootfs = false
	plan.Services[0].ImageVolumes = []string{"/data"}
	p, err := buildProject(plan, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := p.Services["app"]
	if got := describeMounts(s); s.ReadOnly || !slices.Equal(got, []string{"tmpfs:/data@4"}) {
		t.Errorf("read_only %v mounts %v, want only /data as tmpfs", s.ReadOnly, got)
	}
}

// describeMounts is a service's mounts in target order, one short string each:
// type:target, <-source and bind options, @size in 16 MiB units, +uid:gid.
func describeMounts(s types.ServiceConfig) []string {
	byTarget := map[string]string{}
	for _, m := range s.Volumes {
		d := m.Type + ":" + m.Target
		if m.Source != "" {
			d += "<-" + m.Source
		}
		if m.Bind != nil {
			d += fmt.Sprintf("(%s,create=%v,ro=%v)", m.Bind.Propagation, m.Bind.CreateHostPath, m.ReadOnly)
		}
		byTarget[m.Target] = d
	}
	for _, t := range s.Tmpfs {
		target, opts, _ := strings.Cut(t, ":")
		d := "tmpfs:" + target
		for _, o := range strings.Split(opts, ",") {
			if mb, ok := strings.CutPrefix(o, "size="); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(mb, "m"))
				d += "@" + itoa(n/16)
			}
			if uid, ok := strings.CutPrefix(o, "uid="); ok {
				d += "+" + uid
			}
			if gid, ok := strings.CutPrefix(o, "gid="); ok {
				d += ":" + gid
			}
		}
		byTarget[target] = d
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(byTarget)) {
		out = append(out, byTarget[t])
	}
	return out
}

func TestBuildProject_DependsOn_EveryInstanceOnEveryTargetInstance(t *testing.T) {
	web := unitService("web", 2)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_healthy"}, "cache": {Condition: "service_started"}}
	p, err := buildProject(unitPlan(unitService("cache", 1), unitService("db", 3), web), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"web-0", "web-1"} {
		deps := p.Services[key].DependsOn
		want := map[string]string{"cache": "service_started", "db-0": "service_healthy", "db-1": "service_healthy", "db-2": "service_healthy"}
		if len(deps) != len(want) {
			t.Errorf("%s depends_on %v, want %v", key, deps, want)
		}
		for target, cond := range want {
			if d, ok := deps[target]; !ok || d.Condition != cond || !d.Required {
				t.Errorf("%s depends_on[%s] = %+v, want required %s", key, target, d, cond)
			}
		}
	}
	if len(p.Services["db-0"].DependsOn) != 0 {
		t.Errorf("db has dependencies: %v", p.Services["db-0"].DependsOn)
	}
}

func TestBuildProject_HealthCheck_MappedAndNoneDisables(t *testing.T) {
	active := unitService("a", 1)
	active.HealthCheck = &manifest.HealthCheck{Test: []string{"CMD", "probe"}, Interval: manifest.Duration(2 * time.Second), Timeout: manifest.Duration(time.Second), StartPeriod: manifest.Duration(5 * time.Second), Retries: 4}
	none := unitService("n", 1)
	none.HealthCheck = &manifest.HealthCheck{Test: []string{"NONE"}}
	p, err := buildProject(unitPlan(active, none, unitService("z", 1)), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hc := p.Services["a"].HealthCheck
	if hc == nil || !slices.Equal([]string(hc.Test), []string{"CMD", "probe"}) || time.Duration(*hc.Interval) != 2*time.Second ||
		time.Duration(*hc.Timeout) != time.Second || time.Duration(*hc.StartPeriod) != 5*time.Second || *hc.Retries != 4 {
		t.Errorf("active health check = %+v", hc)
	}
	if hc := p.Services["n"].HealthCheck; hc == nil || !hc.Disable {
		t.Errorf("NONE health check = %+v, want disabled", hc)
	}
	if p.Services["z"].HealthCheck != nil {
		t.Errorf("no manifest check must keep the image's own: %+v", p.Services["z"].HealthCheck)
	}
}

// A re-run of the same plan at a later time must hash the same in Compose, or a
// retried launch would recreate healthy containers.
func TestBuildProject_SamePlanLater_SameComposeConfigHash(t *testing.T) {
	svc := unitService("web", 2)
	svc.Env = map[string]string{"A": "1", "B": "2", "C": "3"}
	svc.ImageVolumes = []string{"/z", "/a", "/m"}
	svc.Tmpfs = []string{"/t2", "/t1"}
	a, err := buildProject(unitPlan(svc), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildProject(unitPlan(svc), time.Unix(999999, 0))
	if err != nil {
		t.Fatal(err)
	}
	for key := range a.Services {
		ha, _ := compose.ServiceHash(a.Services[key])
		hb, _ := compose.ServiceHash(b.Services[key])
		if ha != hb {
			t.Errorf("%s: config hash differs between two builds of the same plan", key)
		}
	}
	changed := unitPlan(svc)
	changed.Generation++
	c, _ := buildProject(changed, time.Unix(1, 0))
	ha, _ := compose.ServiceHash(a.Services["web-0"])
	hc, _ := compose.ServiceHash(c.Services["web-0"])
	if ha == hc {
		t.Error("a new generation must change the config hash (Compose then recreates)")
	}
}

func TestBuildProject_InvalidPlans_Refused(t *testing.T) {
	tooMany := unitService("app", 1)
	for i := range 17 {
		tooMany.ImageVolumes = append(tooMany.ImageVolumes, "/v"+itoa(i%10)+itoa(i/10))
	}
	unknownDep := unitService("web", 1)
	unknownDep.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_started"}}
	badCond := unitService("web", 1)
	badCond.DependsOn = map[string]manifest.Dependency{"web2": {Condition: "service_completed_successfully"}}
	noNetwork := unitPlan(unitService("app", 1))
	noNetwork.NetworkID = ""
	withVolumes := func(vols ...string) dockerio.Plan {
		s := unitService("app", 1)
		s.ImageVolumes = vols
		return unitPlan(s)
	}
	stateful := func(dirs ...string) dockerio.Plan {
		s := unitService("db", 2)
		s.DiskMB = 64
		s.ImageVolumes = []string{"/data"}
		s.VolumeDirs = dirs
		return unitPlan(s)
	}
	disklessWithDirs := unitService("app", 1)
	disklessWithDirs.VolumeDirs = []string{"/vols/x"}
	for name, plan := range map[string]dockerio.Plan{
		"stateful without volume dirs":   stateful(),
		"stateful, a dir for one of two": stateful("/vols/a"),
		"stateful, relative dir":         stateful("/vols/a", "vols/b"),
		"stateful, unclean dir":          stateful("/vols/a", "/vols/../b"),
		"diskless with volume dirs":      unitPlan(disklessWithDirs),
		"17 volumes":                     unitPlan(tooMany),
		"volume masks /tmp":              withVolumes("/tmp"),
		"volume in /proc":                withVolumes("/proc/x"),
		"nested volumes":                 withVolumes("/data", "/data/db"),
		"relative volume":                withVolumes("data"),
		"unknown target":                 unitPlan(unknownDep),
		"bad condition":                  unitPlan(badCond, unitService("web2", 1)),
		"no network":                     noNetwork,
		"no services":                    unitPlan(),
		"duplicate service":              unitPlan(unitService("a", 1), unitService("a", 1)),
	} {
		if _, err := buildProject(plan, time.Now()); err == nil {
			t.Errorf("%s: buildProject accepted it", name)
		}
	}
}

// An image's reserved labels are set empty on every container of the service,
// except where berth's own fred.* labels or Compose's labels already write the key.
func TestBuildProject_MaskLabels_SetEmptyWithoutClobberingBerthOrCompose(t *testing.T) {
	svc := unitService("web", 2)
	svc.MaskLabels = []string{"fred.tenant", "fred.created_at", "FRED.TENANT", "traefik.enable",
		"com.docker.compose.oneoff", "com.docker.compose.replace", "fred.something_else"}
	svc.Labels = map[string]string{"tenant.example/tier": "front"}
	plan := unitPlan(svc)
	p, err := buildProject(plan, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"web-0", "web-1"} {
		s := p.Services[key]
		for k, want := range map[string]string{
			"fred.tenant":                plan.Tenant, // berth's own label wins
			"FRED.TENANT":                "",
			"traefik.enable":             "",
			"com.docker.compose.replace": "",
			"fred.something_else":        "",
			"tenant.example/tier":        "front",
		} {
			if got, ok := s.Labels[k]; !ok || got != want {
				t.Errorf("%s: label %s = %q (present %v), want %q", key, k, got, ok, want)
			}
		}
		// Compose's (and berth's custom) labels are Compose's to write: not masked.
		if _, ok := s.Labels["com.docker.compose.oneoff"]; ok || s.CustomLabels["com.docker.compose.oneoff"] != "False" {
			t.Errorf("%s: oneoff masked over Compose's own (labels %q, custom %q)", key, s.Labels["com.docker.compose.oneoff"], s.CustomLabels["com.docker.compose.oneoff"])
		}
		if _, ok := s.Labels[dockerio.LabelCreatedAt]; ok || s.CustomLabels[dockerio.LabelCreatedAt] != "2023-11-14T22:13:20Z" {
			t.Errorf("%s: created_at masked over berth's own", key)
		}
	}
	// Masks are part of a stable configuration: the same plan hashes the same.
	again, _ := buildProject(plan, time.Unix(1800000000, 0))
	h1, _ := compose.ServiceHash(p.Services["web-0"])
	h2, _ := compose.ServiceHash(again.Services["web-0"])
	if h1 != h2 {
		t.Error("config hash differs between two builds of a plan with masks")
	}
}

func TestBuildProject_TenantTmpfsOverlappingImageVolume_Refused(t *testing.T) {
	for _, c := range []struct {
		tmpfs   []string
		refused bool
	}{
		{[]string{"/scratch", "/data2"}, false},
		{[]string{"/data"}, true},       // the same target
		{[]string{"/data/cache"}, true}, // inside the volume
		{[]string{"/var/lib"}, true},    // over the volume
		{[]string{"/var/lib/db"}, true}, // the second volume
		{[]string{"/var/libx"}, false},  // a sibling with a shared prefix
	} {
		for _, disk := range []int64{0, 512} { // diskless (tmpfs) and stateful (bind) alike
			svc := unitService("app", 1)
			svc.DiskMB = disk
			if disk > 0 {
				svc.VolumeDirs = []string{"/vols/fred-L-app-0"}
			}
			svc.ImageVolumes = []string{"/data", "/var/lib/db"}
			svc.Tmpfs = c.tmpfs
			_, err := buildProject(unitPlan(svc), time.Now())
			if refused := err != nil; refused != c.refused || (refused && !errors.Is(err, dockerio.ErrImageNotAdmissible)) {
				t.Errorf("tmpfs %v over volumes %v (disk %d): err %v, want refused=%v", c.tmpfs, svc.ImageVolumes, disk, err, c.refused)
			}
		}
	}
}

// A restart/update target cohort carries its maintenance ID; a provision an empty one.
func TestBuildProject_MaintenanceID_Labelled(t *testing.T) {
	plan := unitPlan(unitService("app", 1))
	plan.MaintenanceID = "6f1c7e0e-0000-4000-8000-000000000001"
	p, err := buildProject(plan, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Services["app"].Labels[dockerio.LabelMaintenanceID]; got != plan.MaintenanceID {
		t.Errorf("fred.maintenance_id = %q, want %q", got, plan.MaintenanceID)
	}
}

// A bridged plan (a single-container lease on Docker's isolated default
// bridge) renders network_mode: bridge, joins no network and has no alias: the
// default bridge has no DNS and nothing of the lease can be resolved by
// another. A bridged plan of more than one container is refused.
func TestBuildProject_Bridged_NetworkModeBridge_NoNetworksNoAliases(t *testing.T) {
	plan := unitPlan(unitService("web", 1))
	plan.NetworkBridged, plan.NetworkName = true, dockerio.DefaultBridgeName
	p, err := buildProject(plan, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Networks) != 0 {
		t.Errorf("project networks %v, want none", p.Networks)
	}
	s := p.Services["web"]
	if s.NetworkMode != "bridge" || len(s.Networks) != 0 {
		t.Errorf("service network_mode %q, networks %v: want bridge and none", s.NetworkMode, s.Networks)
	}
	for _, q := range []dockerio.Plan{unitPlan(unitService("web", 2)), unitPlan(unitService("web", 1), unitService("db", 1))} {
		q.NetworkBridged = true
		if _, err := buildProject(q, time.Now()); err == nil {
			t.Errorf("bridged plan of %d services accepted", len(q.Services))
		}
	}
	// Not bridged: the lease network with the service's alias, as before.
	p, err = buildProject(unitPlan(unitService("web", 1)), time.Now())
	if err != nil || p.Networks[leaseNetworkKey].Name != unitPlan().NetworkID || p.Services["web"].NetworkMode != "" ||
		!slices.Equal(p.Services["web"].Networks[leaseNetworkKey].Aliases, []string{"web"}) {
		t.Errorf("lease-network plan rendered %+v, %+v (%v)", p.Networks, p.Services["web"].Networks, err)
	}
}

// A container's attachment to the default bridge is not listed among its
// networks: the bridge isolates its containers, so being on it shares nothing
// (the runtime refresh's shared-network inventory reads these).
func TestFromSummary_DefaultBridgeNotListedAmongNetworks(t *testing.T) {
	s := container.Summary{ID: "c1", Names: []string{"/x"}, Labels: map[string]string{},
		NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{
			"bridge": {NetworkID: "b"}, "fred-x": {NetworkID: "n"},
		}}}
	if got := fromSummary(s).Networks; !slices.Equal(got, []string{"n"}) {
		t.Fatalf("networks %v, want the lease network alone", got)
	}
}
