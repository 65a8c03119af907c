package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/dockerio/addresspool"
	"github.com/berth-dev/berth/dockerio/isolation"
	"github.com/berth-dev/berth/dockerio/volumes"
)

// The host checks: Docker, its address pools and clock, the volume root, and
// berthd's own /health.

// checkDocker: docker_host answers, with an API berth is built for. It also
// reads /info once for the pool and clock checks.
func checkDocker(ctx context.Context, env *doctorEnv) checkResult {
	const name = "docker"
	d, err := newDockerAPI(env.cfg.DockerHost)
	if err != nil {
		env.dErr = err
		return fail(name, err.Error(), "set docker_host to unix:///var/run/docker.sock (or the engine's tcp:// address)")
	}
	env.docker = d
	ctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	var v dockerVersion
	if err := d.get(ctx, "/_ping", nil); err != nil {
		env.dErr = err
		fix := "start dockerd (systemctl start docker), or point docker_host at its socket"
		if errors.Is(err, syscall.EACCES) {
			fix = "add berthd's user (and yours, for doctor) to the docker group: usermod -aG docker berth"
		}
		return fail(name, "Docker does not answer at "+d.host+": "+err.Error(), fix)
	}
	if err := d.get(ctx, "/version", &v); err != nil {
		env.dErr = err
		return fail(name, err.Error(), "")
	}
	start := time.Now()
	var info dockerInfo
	if err := d.get(ctx, "/info", &info); err != nil {
		env.dErr = err
		return fail(name, err.Error(), "")
	}
	env.info, env.infoAt = &info, start.Add(time.Since(start)/2)
	if !apiAtLeast(v.APIVersion, minDockerAPI) {
		return fail(name, fmt.Sprintf("Docker %s at %s speaks API %s, older than the %s (Docker 20.10) berth is built for", v.Version, d.host, v.APIVersion, minDockerAPI),
			"upgrade Docker (Debian: apt-get install docker.io)")
	}
	return ok(name, fmt.Sprintf("Docker %s at %s (API %s)", v.Version, d.host, v.APIVersion))
}

// notChecked is the verdict of a check that needs Docker when Docker failed.
func notChecked(name string) checkResult {
	return warn(name, "not checked: Docker could not be read (see docker)", "")
}

// checkAddressPools: Docker's default address pools hold a network for every
// lease the resource pool can admit (the same judgement berthd logs at start).
func checkAddressPools(_ context.Context, env *doctorEnv) checkResult {
	const name = "address_pools"
	if env.info == nil {
		return notChecked(name)
	}
	pools := make([]addresspool.Pool, 0, len(env.info.DefaultAddressPools))
	for _, p := range env.info.DefaultAddressPools {
		pools = append(pools, addresspool.Pool{Base: p.Base, Size: p.Size})
	}
	networks, err := addresspool.Capacity(pools)
	if err != nil {
		return warn(name, err.Error(), addresspool.Fix)
	}
	leases := env.cfg.LeaseCapacity()
	if short := addresspool.Shortfall(networks, leases); short != "" {
		return warn(name, short, addresspool.Fix)
	}
	return ok(name, fmt.Sprintf("Docker's address pools hold %d networks, enough for the %d leases the resource pool can admit", networks, leases))
}

// checkIsolationGuard: the mangle chain that keeps Docker's bridges apart
// while Docker rewrites its own isolation rules (dockerio/isolation) is in
// place. berthd puts it back at start and on every reconcile pass; a host
// rebooted since berthd last ran has none yet.
func checkIsolationGuard(ctx context.Context, env *doctorEnv) checkResult {
	const name = "isolation_guard"
	if h := env.cfg.DockerHost; h != "" && !strings.HasPrefix(h, "unix://") {
		return warn(name, "docker_host "+h+" is another host: berthd cannot keep the guard on dockerd's firewall", "run berthd on dockerd's host")
	}
	inPlace, err := isolation.Host.InPlace(ctx)
	switch {
	case err != nil:
		return warn(name, "the firewall could not be read: "+err.Error(), "run berthctl doctor as root")
	case !inPlace:
		return warn(name, "mangle chain BERTH-ISOLATION missing or changed: while Docker creates a network, leases can reach each other",
			"start berthd (it puts the guard back; production_mode refuses to run without it)")
	}
	return ok(name, "mangle chain BERTH-ISOLATION keeps Docker's bridges apart")
}

// checkClock compares Docker's clock with ours.
func checkClock(_ context.Context, env *doctorEnv) checkResult {
	const name = "clock"
	if env.info == nil {
		return notChecked(name)
	}
	theirs, err := time.Parse(time.RFC3339Nano, env.info.SystemTime)
	if err != nil {
		return warn(name, fmt.Sprintf("Docker's /info SystemTime %q does not parse: %v", env.info.SystemTime, err), "")
	}
	skew := theirs.Sub(env.infoAt)
	abs := skew.Abs()
	finding := fmt.Sprintf("Docker's clock is %s %s this host's", abs.Round(time.Millisecond), map[bool]string{true: "ahead of", false: "behind"}[skew >= 0])
	switch {
	case abs >= skewFail:
		return fail(name, finding, "synchronise both clocks (systemctl enable --now systemd-timesyncd, or chrony): callback receivers refuse signatures more than 5 minutes off")
	case abs >= skewWarn:
		return warn(name, finding, "synchronise both clocks (systemd-timesyncd or chrony)")
	}
	return ok(name, fmt.Sprintf("Docker's clock agrees with this host's (within %s)", skewWarn))
}

// statefulSKUs names the profiles with durable disk.
func statefulSKUs(env *doctorEnv) []string {
	var names []string
	for n, p := range env.cfg.SKUProfiles {
		if p.DiskMB > 0 {
			names = append(names, n)
		}
	}
	return names
}

// checkVolumes: the managed-volume root is where berthd will look for it, on a
// btrfs with quotas (enforced) or, in development, plain directories (not
// enforced). Nothing is created: what berthd would create at start is reported.
func checkVolumes(ctx context.Context, env *doctorEnv) checkResult {
	const name = "volumes"
	cfg := env.cfg
	stateful := statefulSKUs(env)
	missing := func(finding, fix string) checkResult {
		if len(stateful) > 0 {
			return fail(name, finding, fix)
		}
		return warn(name, finding+" (no stateful SKU needs it)", fix)
	}
	if cfg.VolumeDataPath == "" {
		if len(stateful) > 0 {
			return fail(name, "volume_data_path is empty but stateful SKUs need managed volumes", "set volume_data_path (and volume_mount_path) to a directory on a btrfs mount with quotas")
		}
		return ok(name, "no volume_data_path: only diskless SKUs are configured")
	}
	data, err := filepath.Abs(cfg.VolumeDataPath)
	if err != nil {
		return fail(name, err.Error(), "")
	}
	mountFix := "mount the btrfs volume filesystem (see INSTALL: the fstab line), then btrfs quota enable it"
	point, fsType, err := volumes.Containing(data)
	if err != nil {
		return missing(err.Error(), mountFix)
	}
	if cfg.VolumeMountPath != "" {
		mnt, err := filepath.Abs(cfg.VolumeMountPath)
		if err != nil {
			return fail(name, err.Error(), "")
		}
		if _, serr := os.Stat(data); serr == nil {
			if err := volumes.VerifyMount(mnt, data); err != nil {
				return missing(err.Error(), mountFix)
			}
		} else if resolved, rerr := filepath.EvalSymlinks(mnt); rerr != nil || resolved != point {
			return missing(fmt.Sprintf("volume_mount_path %s is not the active mount holding %s (that is %s, %s)", mnt, data, point, fsType), mountFix)
		}
		point = mnt
	}
	marker, merr := os.ReadFile(filepath.Join(data, volumes.InstallationMarker))
	if merr == nil && env.store != nil {
		if owner := strings.TrimSpace(string(marker)); owner != env.store.Identity().InstallationID {
			return fail(name, fmt.Sprintf("%s belongs to installation %s, not to this data dir's %s: berthd refuses it", data, owner, env.store.Identity().InstallationID),
				"give this installation its own volume_data_path (or, if installation "+owner+" is gone for good, remove "+filepath.Join(data, volumes.InstallationMarker)+")")
		}
	}
	if _, serr := os.Stat(data); serr == nil && errors.Is(merr, fs.ErrNotExist) && env.store != nil {
		// berthd claims its root at every start: a store without the claim means
		// the filesystem it claimed is not what is mounted here now, and a running
		// berthd holds every volume operation (its /health says so).
		return missing(fmt.Sprintf("%s carries no %s though this data dir's berthd has started: the filesystem holding its volumes is not mounted there (berthd holds closes and reaps until it is), or volume_data_path changed since berthd last started",
			data, volumes.InstallationMarker), mountFix+"; or, after a changed volume_data_path, restart berthd (it claims the root)")
	}
	where := data
	if _, err := os.Stat(data); err != nil {
		where = data + " (created at berthd's start)"
	}
	wantDir := cfg.VolumeFilesystem == volumes.FSDir
	if fsType != volumes.FSBtrfs || wantDir {
		if cfg.ProductionMode {
			return fail(name, fmt.Sprintf("%s is on %s at %s: production_mode needs btrfs with quotas", where, fsType, point), mountFix)
		}
		return warn(name, fmt.Sprintf("%s is on %s at %s: the dir driver is used, quota not enforced", where, fsType, point),
			"for enforced disk quotas put volume_data_path on a btrfs mount with quotas (production_mode requires it)")
	}
	qctx, cancel := context.WithTimeout(ctx, quotaTimeout)
	defer cancel()
	switch err := volumes.CheckQuotas(qctx, point); {
	case errors.Is(err, volumes.ErrQuotaCheckNotPermitted):
		return warn(name, fmt.Sprintf("%s is on btrfs at %s; quotas not checked: reading qgroups needs CAP_SYS_ADMIN", where, point), "run doctor as root to check quotas")
	case errors.Is(err, volumes.ErrQuotasDisabled):
		return fail(name, fmt.Sprintf("%s is on btrfs at %s but quotas are off: berthd refuses it", where, point), "btrfs quota enable "+point)
	case err != nil:
		return fail(name, err.Error(), "apt-get install btrfs-progs")
	}
	return ok(name, fmt.Sprintf("%s is on btrfs at %s with quotas enabled (enforced)", where, point))
}

// checkHealth asks berthd's own API for /health. A callback endpoint is the
// tenant's and differs per lease, so this is the daemon's side of reachability.
func checkHealth(ctx context.Context, env *doctorEnv) checkResult {
	const name = "health"
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	url := strings.TrimRight(env.api, "/") + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(name, err.Error(), "")
	}
	// /health carries no secret and needs no authentication: the probe skips
	// certificate verification so a self-signed or internal-CA listener is still
	// reached (what it checks is that berthd answers, not who it is).
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true} //nolint:gosec
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "certificate required") || strings.Contains(err.Error(), "bad certificate") {
			return warn(name, "berthd answers at "+url+" but its mTLS listener wants a client certificate; health not read", "")
		}
		return fail(name, "berthd does not answer at "+url+": "+err.Error(),
			"systemctl status berthd; journalctl -u berthd -n 50")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var h struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Detail []string `json:"detail"`
	}
	_ = json.Unmarshal(body, &h)
	switch {
	case resp.StatusCode == http.StatusOK && h.Status == "healthy" && len(h.Detail) > 0:
		return warn(name, fmt.Sprintf("berthd at %s is healthy, with findings: %s", env.api, strings.Join(h.Detail, "; ")), "")
	case resp.StatusCode == http.StatusOK && h.Status == "healthy":
		return ok(name, "berthd at "+env.api+" answers healthy")
	}
	reason := h.Error
	if reason == "" {
		reason = strings.TrimSpace(string(body))
	}
	return fail(name, fmt.Sprintf("berthd at %s answers %s: %s", env.api, resp.Status, reason),
		"journalctl -u berthd -n 50 (a starting berthd turns healthy once recovery completes)")
}
