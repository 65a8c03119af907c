package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// TestIsolation_DockersRuleRewriteWindow_GuardKeepsLeasesApart: on every
// network create Docker deletes and re-inserts its isolation jump, and for
// that moment leases on different networks reach each other (a suite run
// caught one). The window is emulated for exactly two leases' containers —
// RETURNs between them at the top of DOCKER-ISOLATION-STAGE-1, so filter
// FORWARD goes on to each network's own ACCEPT as it does while the jump is
// gone (a rule placed first in FORWARD itself would not stay first: every
// network create puts Docker's jumps back above it) — and berthd's guard must
// still drop the traffic. The
// control bypasses the guard for the same pair and must see it cross, so the
// emulation is a real breach and the guard is what stops it.
func TestIsolation_DockersRuleRewriteWindow_GuardKeepsLeasesApart(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		skipOrFail(t, "the isolation guard and its emulated window need root")
	}
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	// Own networks: the window is Docker's rewrite of its isolation between
	// bridges (leases on the default bridge are kept apart by its static icc rule).
	d := newDaemonDir(t, "single_container_network: own").startInProcess()
	a, b := uuid.NewString(), uuid.NewString()
	for _, l := range []string{a, b} {
		if r := d.provision(l, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
			t.Fatalf("provision %s: %d %s", l, r.Status, r.Body)
		}
	}
	for _, l := range []string{a, b} {
		if got := cb.waitFor(l, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
			t.Fatalf("lease %s: %+v", l, got[0].Body)
		}
	}
	var ia messages.LeaseInfo
	d.get("/info/"+a).json(t, &ia)
	webA := "127.0.0.1:" + ia.Services["app"].Instances[0].Ports["8080/tcp"].HostPort
	ipA, ipB := leaseIP(t, dc, a), leaseIP(t, dc, b)
	reaches := func() bool {
		code, _, _ := httpGetHostPort(webA, "/fetch?url=http://"+ipB+":8080/")
		return code == 200
	}
	if reaches() {
		t.Fatalf("lease a reached lease b at %s with Docker's isolation in place", ipB)
	}

	window := pairRules("filter", "DOCKER-ISOLATION-STAGE-1", "RETURN", ipA, ipB)
	addRules(t, window)
	if reaches() {
		t.Fatalf("lease a reached lease b at %s through Docker's rewrite window: the guard did not hold", ipB)
	}
	bypass := pairRules("mangle", "FORWARD", "ACCEPT", ipA, ipB)
	addRules(t, bypass)
	if !reaches() {
		t.Fatalf("control: with the guard bypassed for the pair, lease a did not reach lease b at %s — the emulated window proves nothing", ipB)
	}
	delRules(t, bypass)
	delRules(t, window)
	if reaches() {
		t.Fatalf("lease a reached lease b at %s after the window closed", ipB)
	}
	d.closeAll(dc, a, b)
}

// leaseIP is the IP address of the one container of lease on its network.
func leaseIP(t *testing.T, dc *client.Client, lease string) string {
	t.Helper()
	for _, c := range leaseContainers(t, dc, lease) {
		for _, ep := range c.NetworkSettings.Networks {
			if ep.IPAddress != "" {
				return ep.IPAddress
			}
		}
	}
	t.Fatalf("lease %s: no container with an IP address", lease)
	return ""
}

// pairRules are rules of table's chain sending the traffic between two
// addresses, both ways, to target, placed first.
func pairRules(table, chain, target, x, y string) [][]string {
	return [][]string{
		{"-t", table, chain, "-s", x, "-d", y, "-j", target},
		{"-t", table, chain, "-s", y, "-d", x, "-j", target},
	}
}

func addRules(t *testing.T, rules [][]string) {
	t.Helper()
	for _, r := range rules {
		iptablesRun(t, append([]string{r[0], r[1], "-I", r[2], "1"}, r[3:]...)...)
	}
	t.Cleanup(func() {
		for _, r := range rules {
			_ = exec.Command("iptables", append([]string{"-w", r[0], r[1], "-D", r[2]}, r[3:]...)...).Run()
		}
	})
}

func delRules(t *testing.T, rules [][]string) {
	t.Helper()
	for _, r := range rules {
		iptablesRun(t, append([]string{r[0], r[1], "-D", r[2]}, r[3:]...)...)
	}
}

func iptablesRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
