package isolation

import (
	"context"
	"fmt"
	"strings"
)

// DockerRules is what dockerd programmed in the host's filter table. A dockerd
// started with --iptables=false programs none of it, while its networks still
// read isolated ("icc": false, internal bridges): then nothing is dropped.
type DockerRules struct {
	// Isolation: a rule jumps to DOCKER-ISOLATION-STAGE-1, which keeps
	// Docker's bridge networks apart.
	Isolation bool
	// ICCDrop: a rule drops traffic from one port of the bridge asked about to
	// another (the daemon's "icc": false).
	ICCDrop bool
}

// DockerRules reads dockerd's rules for bridge (its interface, e.g. docker0).
func (g Guard) DockerRules(ctx context.Context, bridge string) (DockerRules, error) {
	out, err := g.run(ctx, g.IPTables, "", "-w", "-t", "filter", "-S")
	if err != nil {
		return DockerRules{}, fmt.Errorf("read dockerd's firewall rules: %w", err)
	}
	return parseDockerRules(string(out), bridge), nil
}

// parseDockerRules reads iptables -S output: every chain, since where dockerd
// puts its rules (FORWARD, DOCKER-FORWARD) changed across releases.
func parseDockerRules(out, bridge string) DockerRules {
	var r DockerRules
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "-A" {
			continue
		}
		in, outIf, target, negated := "", "", "", false
		for i := 2; i < len(f); i++ {
			switch {
			case f[i] == "!":
				negated = true
				continue
			case i+1 < len(f) && f[i] == "-i" && !negated:
				in = f[i+1]
			case i+1 < len(f) && f[i] == "-o" && !negated:
				outIf = f[i+1]
			case i+1 < len(f) && f[i] == "-j":
				target = f[i+1]
			}
			negated = false
		}
		switch {
		case target == "DOCKER-ISOLATION-STAGE-1":
			r.Isolation = true
		case target == "DROP" && bridge != "" && in == bridge && outIf == bridge:
			r.ICCDrop = true
		}
	}
	return r
}
