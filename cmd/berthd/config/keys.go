package config

import (
	"fmt"
	"reflect"
)

// shape describes which keys a config map may hold, so typos are caught.
// A nil *shape is a leaf: any value, checked later by the decoder.
type shape struct {
	fields map[string]*shape // a struct: exactly these keys
	each   *shape            // a map with free keys (profile names, SKU ids); each value has this shape
}

// schema is every key berthd reads: Config's key tags. defaults.yaml must set
// each of them except tenant_quota (optional); a test holds the two in step.
var schema = shapeOf(reflect.TypeFor[Config]())

// shapeOf is the shape of a struct's tagged fields: a struct is a section, a map
// has free keys, anything else is a leaf.
func shapeOf(t reflect.Type) *shape {
	s := &shape{fields: map[string]*shape{}}
	for f := range t.Fields() {
		key := f.Tag.Get("key")
		switch {
		case key == "":
		case f.Type.Kind() == reflect.Struct:
			s.fields[key] = shapeOf(f.Type)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			s.fields[key] = &shape{each: shapeOf(f.Type.Elem())}
		case f.Type.Kind() == reflect.Map:
			s.fields[key] = &shape{}
		default:
			s.fields[key] = nil
		}
	}
	return s
}

// listKeys are the keys whose value is a list of strings, as dotted paths. A
// layer replaces a list whole, and the environment gives one comma-separated.
var listKeys = map[string]bool{
	"allowed_registries":                  true,
	"tls_client_allowed_names":            true,
	"ingress.custom_domain_middlewares":   true,
	"ingress.custom_domain_dns_resolvers": true,
}

// replacedWhole are the keys (dotted paths) a layer replaces instead of merging
// into (ENG-238): the free-key maps and every list. Lists are listed for
// clarity; koanf's merge already replaces non-map values.
var replacedWhole = append([]string{"sku_profiles", "sku_mapping"}, sortedKeys(listKeys)...)

// unknownKeys walks m against s and returns "<path>: unknown key in <where>"
// messages, sorted, with a suggestion when a known key is a likely typo.
func unknownKeys(where, prefix string, m map[string]any, s *shape) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, k := range sortedKeys(m) {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		var sub *shape
		switch {
		case s.fields != nil:
			child, known := s.fields[k]
			if !known {
				msg := path + ": unknown key in " + where
				if guess := closestKey(k, s.fields); guess != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", guess)
				}
				out = append(out, msg)
				continue
			}
			sub = child
		default:
			sub = s.each
		}
		if child, ok := m[k].(map[string]any); ok && sub != nil {
			out = append(out, unknownKeys(where, path, child, sub)...)
		}
	}
	return out
}

// closestKey returns the known key within edit distance 2 of k, if any.
func closestKey(k string, known map[string]*shape) string {
	best, bestDist := "", 3
	for name := range known {
		if d := editDistance(k, name); d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
