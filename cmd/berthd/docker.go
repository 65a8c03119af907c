package main

import (
	"context"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/actors/netpool"
	"github.com/berth-dev/berth/actors/reclaimer"
	"github.com/berth-dev/berth/actors/reconciler"
	"github.com/berth-dev/berth/actors/refresh"
	"github.com/berth-dev/berth/actors/watcher"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/dockerio/isolation"
)

// docker is the engine the wiring hands every actor: the union of the ports
// the actors declare (each depends on its own few calls), and what start asks
// of Docker itself. dockerio/engine is it; a benchmark's in-memory engine too.
type docker interface {
	steps.ImagesAPI
	steps.NetworksAPI
	steps.ContainersAPI
	reclaimer.Docker
	netpool.Docker
	watcher.Docker
	reconciler.Docker
	refresh.Lister
	DefaultBridge(ctx context.Context) (dockerio.BridgeFacts, error)
	DockerFirewall(ctx context.Context) (isolation.DockerRules, error)
	SeccompEnabled(ctx context.Context) (bool, error)
	FredV013Objects(ctx context.Context) ([]dockerio.FredObject, error)
}

var _ docker = (*engine.Engine)(nil)

// leaseDocker is eng as the lease's three ports.
func leaseDocker(eng docker) steps.Docker {
	return steps.Docker{ImagesAPI: eng, NetworksAPI: eng, ContainersAPI: eng}
}
