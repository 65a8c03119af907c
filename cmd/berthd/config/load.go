package config

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// Load reads the embedded defaults, then the YAML file at path (if path != ""),
// then the BERTH_* entries of environ, decodes and validates. Any problem yields
// a *Problems listing every problem found, each "<key>: <what is wrong>"; a file
// that cannot be read or parsed is the single problem reported.
func Load(path string, environ []string) (*Config, error) {
	ko := koanf.New(".")
	replacing := koanf.WithMergeFunc(mergeReplacing)
	if err := ko.Load(rawbytes.Provider(defaultsYAML), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("embedded defaults.yaml: %w", err)
	}

	ps := newProblemSet()
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
		ps.list = append(ps.list, unknownKeys(path, "", fileMap, schema)...)
		if err := ko.Load(mapProvider(fileMap), nil, replacing); err != nil {
			return nil, fmt.Errorf("merge %s: %w", path, err)
		}
	}

	env := newEnvironProvider(environ)
	ps.list = append(ps.list, env.conflicts...)
	if err := ko.Load(env, nil, replacing); err != nil {
		return nil, fmt.Errorf("merge environment: %w", err)
	}

	d := &decoder{root: ko.Raw(), ps: ps}
	c := d.decode()
	c.File = path
	for _, name := range env.unknown {
		c.Warnings = append(c.Warnings, name+": names no configuration key; ignored")
	}
	validate(c, ps, d.quotaSet)
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
		if _, ok := src[key]; ok {
			delete(dest, key)
		}
	}
	mergeInto(src, dest)
	return nil
}

func mergeInto(src, dest map[string]any) {
	for key, value := range src {
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
