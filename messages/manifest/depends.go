package manifest

import (
	"maps"
	"slices"
)

// maxDependencyDepth bounds the longest depends_on chain, counted in edges: a→b→c
// is depth 2.
const maxDependencyDepth = 10

// checkDependencies validates depends_on across the stack: targets exist and are
// not the service itself, service_healthy targets have an active health check, and
// the graph is acyclic and at most maxDependencyDepth deep. Services and targets
// are visited in name order so the reported error is deterministic.
func checkDependencies(services map[string]*Service) error {
	names := slices.Sorted(maps.Keys(services))
	for _, name := range names {
		for _, target := range slices.Sorted(maps.Keys(services[name].DependsOn)) {
			t, ok := services[target]
			switch {
			case target == name:
				return invalid("service %q: depends_on: a service cannot depend on itself", name)
			case !ok:
				return invalid("service %q: depends_on: %q is not a service of this manifest", name, target)
			case services[name].DependsOn[target].Condition == ConditionHealthy && !t.HealthCheck.Active():
				return invalid("service %q: depends_on %q: condition service_healthy needs an active health_check (CMD or CMD-SHELL) on %q",
					name, target, target)
			}
		}
	}

	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[string]int, len(services))
	depth := make(map[string]int, len(services))
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case visiting:
			return invalid("service %q: depends_on forms a cycle", name)
		case done:
			return nil
		}
		state[name] = visiting
		d := 0
		for _, target := range slices.Sorted(maps.Keys(services[name].DependsOn)) {
			if err := visit(target); err != nil {
				return err
			}
			d = max(d, depth[target]+1)
		}
		if d > maxDependencyDepth {
			return invalid("service %q: depends_on chain is %d levels deep; at most %d are allowed", name, d, maxDependencyDepth)
		}
		state[name], depth[name] = done, d
		return nil
	}
	for _, name := range names {
		if err := visit(name); err != nil {
			return err
		}
	}
	return nil
}
