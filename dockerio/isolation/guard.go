// Package isolation is the isolation guard. Docker keeps bridge networks
// apart with the jump FORWARD → DOCKER-ISOLATION-STAGE-1 in the filter table, and on every network
// create it DELETES that jump and inserts it again (to keep it first), after
// inserting the new network's ACCEPT rules above everything (seen with strace:
// ~29 iptables runs per create). Between the delete and the insert no bridge is
// isolated from any other: for one iptables run, tens of milliseconds idle and
// hundreds on a busy host, a container on one lease's network reaches every
// other lease's containers (a suite run caught one lease fetching another's
// db). berth creates networks all the time (the warm pool, leases), so the
// window is routine, not rare.
//
// The guard is a chain in the mangle table, which Docker's bridge driver never
// touches and whose FORWARD hook runs before filter's, dropping exactly what
// Docker's isolation drops: traffic routed from one Docker bridge to another
// (br-* to br-*, not bridged within one; docker0 to br-* and back). Traffic
// within a network (bridged), to the host and to the outside is untouched.
// It is checked at start and on every reconcile pass and put back whole when
// it differs; it stays when berthd stops (its leases keep running).
package isolation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// guardChain is the mangle chain berth owns.
const guardChain = "BERTH-ISOLATION"

// guardRules are the chain's rules, as iptables -S prints them. Traffic to a
// published port (DNAT: a container to the host's address, hairpin within a
// network when the userland proxy is off) is left to Docker's rules: a
// published port is public anyway.
var guardRules = []string{
	"-i br-+ -o br-+ -m physdev ! --physdev-is-bridged -m conntrack ! --ctstate DNAT -j DROP",
	"-i docker0 -o br-+ -m conntrack ! --ctstate DNAT -j DROP",
	"-i br-+ -o docker0 -m conntrack ! --ctstate DNAT -j DROP",
}

// Guard runs iptables (argv prefix IPTables, and Restore for
// iptables-restore) in the network namespace dockerd programs.
type Guard struct {
	IPTables, Restore []string
}

// Host is the guard of this host's network namespace: the iptables dockerd
// itself runs (it finds it on its PATH as berthd does). It needs root
// (CAP_NET_ADMIN).
var Host = Guard{IPTables: []string{"iptables"}, Restore: []string{"iptables-restore"}}

// Ensure makes sure the guard is in place, putting it back whole when it is
// missing or differs; installed reports that it had to.
func (g Guard) Ensure(ctx context.Context) (bool, error) {
	chainOK, jumps, err := g.state(ctx)
	if err != nil || (chainOK && jumps == 1) {
		return false, err
	}
	if !chainOK {
		var script strings.Builder
		fmt.Fprintf(&script, "*mangle\n:%s - [0:0]\n", guardChain) // with --noflush: the chain alone is replaced
		for _, r := range guardRules {
			fmt.Fprintf(&script, "-A %s %s\n", guardChain, r)
		}
		script.WriteString("COMMIT\n")
		if _, err := g.run(ctx, g.Restore, script.String(), "-w", "--noflush"); err != nil {
			return false, fmt.Errorf("isolation guard: write the %s chain: %w", guardChain, err)
		}
	}
	if jumps == 0 {
		if _, err := g.run(ctx, g.IPTables, "", "-w", "-t", "mangle", "-I", "FORWARD", "1", "-j", guardChain); err != nil {
			return false, fmt.Errorf("isolation guard: jump to %s from mangle FORWARD: %w", guardChain, err)
		}
	}
	for ; jumps > 1; jumps-- { // two daemons starting at once both inserted one
		if _, err := g.run(ctx, g.IPTables, "", "-w", "-t", "mangle", "-D", "FORWARD", "-j", guardChain); err != nil {
			return false, fmt.Errorf("isolation guard: a second jump to %s: %w", guardChain, err)
		}
	}
	return true, nil
}

// InPlace reports whether the guard is exactly in place, without changing
// anything (berthctl doctor).
func (g Guard) InPlace(ctx context.Context) (bool, error) {
	chainOK, jumps, err := g.state(ctx)
	return chainOK && jumps == 1, err
}

// state reports whether the chain holds exactly guardRules and how many
// jumps mangle FORWARD has to it. An iptables that cannot run is an error.
func (g Guard) state(ctx context.Context) (chainOK bool, jumps int, err error) {
	out, err := g.run(ctx, g.IPTables, "", "-w", "-t", "mangle", "-S", guardChain)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		out = nil // no such chain
	case err != nil:
		return false, 0, fmt.Errorf("isolation guard: %w", err)
	}
	want := []string{"-N " + guardChain}
	for _, r := range guardRules {
		want = append(want, "-A "+guardChain+" "+r)
	}
	chainOK = strings.TrimSpace(string(out)) == strings.Join(want, "\n")
	fwd, err := g.run(ctx, g.IPTables, "", "-w", "-t", "mangle", "-S", "FORWARD")
	if err != nil {
		return false, 0, fmt.Errorf("isolation guard: %w", err)
	}
	for _, line := range strings.Split(string(fwd), "\n") {
		if strings.TrimSpace(line) == "-A FORWARD -j "+guardChain {
			jumps++
		}
	}
	return chainOK, jumps, nil
}

// run runs argv + args with stdin, returning stdout; a failure carries stderr.
func (g Guard) run(ctx context.Context, argv []string, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", strings.Join(argv, " "), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
