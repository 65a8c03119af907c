package config

import (
	"cmp"
	"fmt"
	"strings"
)

const envPrefix = "BERTH_"

// aliasPrefix is Fred's docker-backend's environment prefix: DOCKER_BACKEND_<KEY>
// is read as BERTH_<KEY>, so a Fred host's own environment configures berthd.
const aliasPrefix = "DOCKER_BACKEND_"

// aliasNames are the aliases whose key is not their name's: Fred's
// DOCKER_BACKEND_ADDR is listen_addr, and the Docker CLI's DOCKER_HOST is docker_host.
var aliasNames = map[string]string{"DOCKER_BACKEND_ADDR": "BERTH_LISTEN_ADDR", "DOCKER_HOST": "BERTH_DOCKER_HOST"}

// environLayer is the BERTH_* entries of an explicit environ slice (koanf's env
// provider only reads os.Environ, which tests cannot isolate), and their aliases,
// as a tree: BERTH_A__B=v is {"a": {"b": "v"}}; see the package comment.
type environLayer struct {
	tree map[string]any
	// unknown are BERTH_* (or DOCKER_BACKEND_*) variables that name no key; they
	// are left out of tree.
	unknown []string
	// conflicts are "BERTH_X: ..." messages for variables that cannot coexist
	// (BERTH_DEBUG=1 with BERTH_DEBUG__CHAOS=true) or cannot be split into a key.
	conflicts []string
	// notices say, once each, which alias was read as which key and which one a
	// BERTH_* variable (or an earlier alias) overrode.
	notices []string
}

// newEnvironLayer reads BERTH_* first, then the aliases in name order
// (DOCKER_BACKEND_* before DOCKER_HOST): the first variable to set a key wins.
func newEnvironLayer(environ []string) *environLayer {
	vars, aliases := map[string]string{}, map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
		case strings.HasPrefix(name, envPrefix):
			vars[name] = value // a later duplicate wins, as in os/exec
		case strings.HasPrefix(name, aliasPrefix) || aliasNames[name] != "":
			aliases[name] = value
		}
	}
	p := &environLayer{tree: map[string]any{}}
	owner := map[string]string{} // dotted path → variable that created it
	for _, name := range sortedKeys(vars) {
		if other, clash, known := p.insert(name, name, vars[name], owner); !known {
			p.unknown = append(p.unknown, name)
		} else if clash {
			p.conflicts = append(p.conflicts, fmt.Sprintf("%s: conflicts with %s", name, other))
		}
	}
	for _, name := range sortedKeys(aliases) {
		as := cmp.Or(aliasNames[name], envPrefix+strings.TrimPrefix(name, aliasPrefix))
		switch other, clash, known := p.insert(name, as, aliases[name], owner); {
		case !known:
			p.unknown = append(p.unknown, name)
		case clash:
			p.notices = append(p.notices, fmt.Sprintf("%s: ignored: %s is set too and wins", name, other))
		default:
			key := strings.Join(pathOf(as), ".")
			p.notices = append(p.notices, fmt.Sprintf("%s: read as %s (%s wins when both are set)", name, key, as))
		}
	}
	return p
}

// insert puts the variable name, read as the BERTH_* variable as, into the tree;
// known is false when as names no key, clash when another variable (other) owns
// the path.
func (p *environLayer) insert(name, as, value string, owner map[string]string) (other string, clash, known bool) {
	path := pathOf(as)
	if !schemaKnows(path) {
		return "", false, false
	}
	var v any = value
	if listKeys[strings.Join(path, ".")] {
		v = splitList(value)
	}
	other, clash = insertPath(p.tree, path, v, owner, name)
	return other, clash, true
}

// pathOf is the key path a BERTH_* variable names: BERTH_DEBUG__TOKEN is debug, token.
func pathOf(berthName string) []string {
	return strings.Split(strings.ToLower(strings.TrimPrefix(berthName, envPrefix)), "__")
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
