package config

import (
	_ "embed"
	"fmt"
	"os"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// Load reads the embedded defaults, then the YAML file at path (if path != ""),
// then the BERTH_* entries of environ (and their DOCKER_BACKEND_* and DOCKER_HOST
// aliases, each noticed in Warnings), decodes and validates. Any problem yields
// a *Problems listing every problem found, each "<key>: <what is wrong>"; a file
// that cannot be read or parsed is the single problem reported.
func Load(path string, environ []string) (*Config, error) {
	ko := koanf.New(".")
	replacing := koanf.WithMergeFunc(mergeReplacing)
	if err := ko.Load(rawbytes.Provider(defaultsYAML), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("embedded defaults.yaml: %w", err)
	}

	ps := newProblemSet()
	operator := map[string]bool{} // top-level keys the file or the environment set
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, &Problems{List: []string{fmt.Sprintf("%s: cannot read config file: %v", path, err)}}
		}
		// A koanf of its own normalises the YAML (non-string map keys) so the file's
		// keys can be checked for typos before they are merged over the defaults.
		file := koanf.New(".")
		if err := file.Load(rawbytes.Provider(raw), yaml.Parser()); err != nil {
			return nil, &Problems{List: []string{fmt.Sprintf("%s: not valid YAML: %v", path, err)}}
		}
		fileMap := file.Raw()
		for key := range fileMap {
			operator[key] = true
		}
		ps.list = append(ps.list, unknownKeys(path, "", fileMap, schema)...)
		if err := ko.Load(mapProvider(fileMap), nil, replacing); err != nil {
			return nil, fmt.Errorf("merge %s: %w", path, err)
		}
	}

	env := newEnvironLayer(environ)
	ps.list = append(ps.list, env.conflicts...)
	for key := range env.tree {
		operator[key] = true
	}
	if err := ko.Load(mapProvider(env.tree), nil, replacing); err != nil {
		return nil, fmt.Errorf("merge environment: %w", err)
	}

	d := &decoder{root: ko.Raw(), ps: ps}
	c := d.decode()
	c.File = path
	for _, name := range env.unknown {
		c.Warnings = append(c.Warnings, name+": names no configuration key; ignored")
	}
	c.Warnings = append(c.Warnings, env.notices...)
	validate(c, ps, given{quota: d.given, operator: operator})
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// mergeReplacing is koanf's deep merge except that the keys in replacedWhole are
// replaced, never merged into (ENG-238): a file listing one SKU profile must not
// inherit the four starter profiles.
func mergeReplacing(src, dest map[string]any) error {
	for _, key := range replacedWhole {
		path := strings.Split(key, ".")
		if _, ok := lookupPath(src, path); !ok {
			continue
		}
		if parent, ok := lookupPath(dest, path[:len(path)-1]); ok {
			if m, ok := parent.(map[string]any); ok {
				delete(m, path[len(path)-1])
			}
		}
	}
	mergeInto(src, dest)
	return nil
}

// lookupPath returns the value at path in m (m itself for an empty path).
func lookupPath(m map[string]any, path []string) (any, bool) {
	var node any = m
	for _, seg := range path {
		sub, ok := node.(map[string]any)
		if !ok {
			return nil, false
		}
		if node, ok = sub[seg]; !ok {
			return nil, false
		}
	}
	return node, true
}

// mergeInto merges src into dest. A null over a section (debug:, ingress: with
// every line below commented out) leaves the section below as it was, as a null
// does in Fred's YAML decoding; the keys in replacedWhole were removed from
// dest beforehand, so a null there still replaces.
func mergeInto(src, dest map[string]any) {
	for key, value := range src {
		if value == nil {
			if _, section := dest[key].(map[string]any); section {
				continue
			}
		}
		if sub, ok := value.(map[string]any); ok {
			if existing, ok := dest[key].(map[string]any); ok {
				mergeInto(sub, existing)
				continue
			}
		}
		dest[key] = value
	}
}

// mapProvider is a koanf.Provider over an already parsed map.
type mapProvider map[string]any

func (m mapProvider) Read() (map[string]any, error) { return m, nil }
func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, fmt.Errorf("map provider has no byte form")
}
