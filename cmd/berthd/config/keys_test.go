package config

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
)

// The schema (what is accepted) and defaults.yaml (what is documented and
// defaulted) must list the same keys, or a key would be silently unusable or
// undocumented.
func TestDefaultsYAML_SetsEverySchemaKey_AndNoOther(t *testing.T) {
	m, err := yaml.Parser().Unmarshal(defaultsYAML)
	if err != nil {
		t.Fatal(err)
	}
	if unknown := unknownKeys("defaults.yaml", "", m, schema); len(unknown) != 0 {
		t.Fatalf("defaults.yaml has keys the schema lacks: %q", unknown)
	}
	optional := map[string]bool{"tenant_quota": true}
	for _, key := range fixedKeys("", schema) {
		if _, ok := lookupPath(m, strings.Split(key, ".")); !ok && !optional[strings.Split(key, ".")[0]] {
			t.Errorf("defaults.yaml does not set %s", key)
		}
	}
	for _, key := range replacedWhole {
		if !schemaKnows(strings.Split(key, ".")) {
			t.Errorf("replacedWhole names %s, which is not a key", key)
		}
	}
	for key := range listKeys {
		if !slices.Contains(replacedWhole, key) {
			t.Errorf("list key %s is not in replacedWhole", key)
		}
	}
}

// fixedKeys lists the dotted leaf keys and free-key maps of s (the keys of
// sections such as debug and ingress, not the names inside sku_profiles).
func fixedKeys(prefix string, s *shape) []string {
	var out []string
	for _, name := range sortedKeys(s.fields) {
		key := prefix + name
		if child := s.fields[name]; child != nil && child.fields != nil {
			out = append(out, fixedKeys(key+".", child)...)
			continue
		}
		out = append(out, key)
	}
	return out
}

func TestSchemaKnows_FreeKeyMapsAcceptAnyName_TyposRefused(t *testing.T) {
	cases := map[string]bool{
		"listen_addr":                  true,
		"debug.chaos":                  true,
		"debug.chaoss":                 false,
		"sku_profiles.any.cpu_cores":   true,
		"sku_profiles.any.cpu":         false,
		"sku_mapping.some-uuid":        true,
		"sku_mapping.some-uuid.deeper": false,
		"listen_addr.port":             false,
		"retain_on_close":              true,
		"retain_on_clse":               false,
		"ingress.enabled":              true,
		"ingress.custom_domain_dns":    false,
		"debug.token":                  true,
	}
	keys := make([]string, 0, len(cases))
	for k := range cases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got := schemaKnows(strings.Split(k, ".")); got != cases[k] {
			t.Errorf("schemaKnows(%s) = %v, want %v", k, got, cases[k])
		}
	}
}
