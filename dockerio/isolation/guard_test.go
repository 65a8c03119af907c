package isolation

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// mustRun: under make test (BERTH_REQUIRE_DOCKER=1) and in CI a missing
// prerequisite fails the test instead of skipping it.
func mustRun(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("cannot run: %s (BERTH_REQUIRE_DOCKER/CI demand it)", why)
	}
	t.Skip("SKIPPING: " + why)
}

// netnsGuard is the guard of a throwaway network namespace: the real iptables,
// without touching the host's firewall.
func netnsGuard(t *testing.T) (Guard, func(args ...string) (string, error)) {
	t.Helper()
	if os.Geteuid() != 0 {
		mustRun(t, "the isolation guard needs root")
	}
	for _, bin := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			mustRun(t, bin+" not installed")
		}
	}
	ns := "berth-guard-" + uuid.NewString()[:8]
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	in := []string{"ip", "netns", "exec", ns}
	g := Guard{IPTables: append(in[:4:4], "iptables"), Restore: append(in[:4:4], "iptables-restore")}
	ipt := func(args ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "iptables", "-w"}, args...)...).CombinedOutput()
		return string(out), err
	}
	return g, ipt
}

// TestIsolationGuard_Installed_ThenFoundInPlace_RepairedWhole: the first
// ensure installs the chain and mangle FORWARD's jump to it; the next finds
// it as written (iptables -S prints the rules exactly as the guard states
// them: else every pass would rewrite it); a chain changed by hand, a lost
// jump and a doubled one are put back whole.
func TestIsolationGuard_Installed_ThenFoundInPlace_RepairedWhole(t *testing.T) {
	g, ipt := netnsGuard(t)
	ctx := context.Background()
	ensure := func(want bool, when string) {
		t.Helper()
		installed, err := g.Ensure(ctx)
		if ok, ierr := g.InPlace(ctx); ierr != nil || !ok {
			t.Fatalf("%s: not in place after Ensure: %v", when, ierr)
		}
		if err != nil || installed != want {
			t.Fatalf("%s: installed %t, %v; want %t", when, installed, err, want)
		}
	}
	ensure(true, "a fresh namespace")
	ensure(false, "the guard in place")
	out, err := ipt("-t", "mangle", "-S", guardChain)
	if err != nil || !strings.Contains(out, "-A BERTH-ISOLATION -i br-+ -o br-+ -m physdev ! --physdev-is-bridged -m conntrack ! --ctstate DNAT -j DROP") {
		t.Fatalf("chain after ensure: %v\n%s", err, out)
	}

	if out, err := ipt("-t", "mangle", "-D", guardChain, "-i", "docker0", "-o", "br-+", "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP"); err != nil {
		t.Fatalf("remove a rule: %v %s", err, out)
	}
	if out, err := ipt("-t", "mangle", "-A", guardChain, "-j", "ACCEPT"); err != nil {
		t.Fatalf("add a rule: %v %s", err, out)
	}
	ensure(true, "a rule removed and an ACCEPT added")
	if out, _ := ipt("-t", "mangle", "-S", guardChain); strings.Contains(out, "-j ACCEPT") || !strings.Contains(out, "-i docker0 -o br-+") {
		t.Fatalf("chain not put back whole:\n%s", out)
	}

	if out, err := ipt("-t", "mangle", "-D", "FORWARD", "-j", guardChain); err != nil {
		t.Fatalf("remove the jump: %v %s", err, out)
	}
	ensure(true, "the jump removed")
	jumps := func() int {
		out, _ := ipt("-t", "mangle", "-S", "FORWARD")
		return strings.Count(out, "-j "+guardChain)
	}
	if n := jumps(); n != 1 {
		t.Fatalf("%d jumps to the guard after the repair, want 1", n)
	}
	// Two daemons starting at once may both insert the jump: one stays.
	if out, err := ipt("-t", "mangle", "-I", "FORWARD", "1", "-j", guardChain); err != nil {
		t.Fatalf("second jump: %v %s", err, out)
	}
	ensure(true, "two jumps")
	if n := jumps(); n != 1 {
		t.Fatalf("%d jumps to the guard after ensure, want 1", n)
	}
	ensure(false, "the guard in place again")
}
