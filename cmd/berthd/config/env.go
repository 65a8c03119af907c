package config

import (
	"fmt"
	"strings"
)

const envPrefix = "BERTH_"

// environLayer is the BERTH_* entries of an explicit environ slice (koanf's env
// provider only reads os.Environ, which tests cannot isolate) as a tree:
// BERTH_A__B=v is {"a": {"b": "v"}}; see the package comment.
type environLayer struct {
	tree map[string]any
	// unknown are BERTH_* variables that name no key; they are left out of tree.
	unknown []string
	// conflicts are "BERTH_X: ..." messages for variables that cannot coexist
	// (BERTH_DEBUG=1 with BERTH_DEBUG__CHAOS=true) or cannot be split into a key.
	conflicts []string
}

func newEnvironLayer(environ []string) *environLayer {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) {
			continue
		}
		vars[name] = value // a later duplicate wins, as in os/exec
	}

	p := &environLayer{tree: map[string]any{}}
	owner := map[string]string{} // dotted path → variable that created it
	for _, name := range sortedKeys(vars) {
		path := strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__")
		if !schemaKnows(path) {
			p.unknown = append(p.unknown, name)
			continue
		}
		var value any = vars[name]
		if listKeys[strings.Join(path, ".")] {
			value = splitList(vars[name])
		}
		if other, clash := insertPath(p.tree, path, value, owner, name); clash {
			p.conflicts = append(p.conflicts, fmt.Sprintf("%s: conflicts with %s", name, other))
		}
	}
	return p
}

// schemaKnows reports whether a key path names a key berthd reads. Free-key maps
// (sku_profiles, sku_mapping) accept any non-empty name at their level.
func schemaKnows(path []string) bool {
	s := schema
	for _, seg := range path {
		if s == nil || seg == "" {
			return false
		}
		if s.fields != nil {
			child, ok := s.fields[seg]
			if !ok {
				return false
			}
			s = child
			continue
		}
		s = s.each
	}
	return true
}

// insertPath sets tree[path...] = value, creating maps on the way. It refuses to
// put a value where a map or value already is, or to descend through a value,
// and then names the variable that owns the clashing path.
func insertPath(tree map[string]any, path []string, value any, owner map[string]string, name string) (string, bool) {
	node := tree
	for i, seg := range path[:len(path)-1] {
		key := strings.Join(path[:i+1], ".")
		switch next := node[seg].(type) {
		case nil:
			m := map[string]any{}
			node[seg] = m
			owner[key] = name
			node = m
		case map[string]any:
			node = next
		default:
			return owner[key], true
		}
	}
	last, key := path[len(path)-1], strings.Join(path, ".")
	if _, exists := node[last]; exists {
		return owner[key], true
	}
	node[last] = value
	owner[key] = name
	return "", false
}

// splitList splits a comma-separated value, trimming entries and dropping empty ones.
func splitList(s string) []any {
	out := []any{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
