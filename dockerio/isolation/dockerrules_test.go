package isolation

import (
	"context"
	"testing"
)

func TestParseDockerRules_WhatDockerdProgrammedOrNot(t *testing.T) {
	const docker2010 = `-P FORWARD DROP
-N DOCKER
-N DOCKER-ISOLATION-STAGE-1
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -i docker0 ! -o docker0 -j ACCEPT
-A FORWARD -i docker0 -o docker0 -j DROP`
	for _, tc := range []struct {
		name, out, bridge string
		want              DockerRules
	}{
		{"docker 20.10 with icc off", docker2010, "docker0", DockerRules{Isolation: true, ICCDrop: true}},
		{"icc on: no drop on the bridge", "-A FORWARD -j DOCKER-ISOLATION-STAGE-1\n-A FORWARD -i docker0 -o docker0 -j ACCEPT", "docker0", DockerRules{Isolation: true}},
		{"a negated out-interface is not the drop", "-A FORWARD -i docker0 ! -o docker0 -j DROP", "docker0", DockerRules{}},
		{"another bridge's drop", "-A FORWARD -i br-1 -o br-1 -j DROP", "docker0", DockerRules{}},
		{"newer dockerd's own chain", "-A FORWARD -j DOCKER-FORWARD\n-A DOCKER-FORWARD -j DOCKER-ISOLATION-STAGE-1\n-A DOCKER-FORWARD -i docker0 -o docker0 -j DROP", "docker0",
			DockerRules{Isolation: true, ICCDrop: true}},
		{"--iptables=false: nothing", "-P INPUT ACCEPT\n-P FORWARD ACCEPT\n-P OUTPUT ACCEPT", "docker0", DockerRules{}},
	} {
		if got := parseDockerRules(tc.out, tc.bridge); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The real iptables in a namespace dockerd never programmed reads as
// --iptables=false; once the rules are there, as dockerd's.
func TestDockerRules_RealIptables_EmptyThenProgrammed(t *testing.T) {
	g, ipt := netnsGuard(t)
	ctx := context.Background()
	if r, err := g.DockerRules(ctx, "docker0"); err != nil || r != (DockerRules{}) {
		t.Fatalf("an empty filter table: %+v %v, want nothing programmed", r, err)
	}
	for _, args := range [][]string{{"-N", "DOCKER-ISOLATION-STAGE-1"}, {"-A", "FORWARD", "-j", "DOCKER-ISOLATION-STAGE-1"},
		{"-A", "FORWARD", "-i", "docker0", "-o", "docker0", "-j", "DROP"}} {
		if out, err := ipt(args...); err != nil {
			t.Fatalf("iptables %v: %v %s", args, err, out)
		}
	}
	if r, err := g.DockerRules(ctx, "docker0"); err != nil || r != (DockerRules{Isolation: true, ICCDrop: true}) {
		t.Fatalf("dockerd's rules: %+v %v", r, err)
	}
}
