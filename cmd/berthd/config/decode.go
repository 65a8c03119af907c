package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// decoder turns the merged koanf map into a typed Config, one key at a time, so a
// wrong value becomes a "<key>: ..." problem instead of aborting the whole decode
// (mapstructure stops being useful there, and would accept "7d" only to fail
// somewhere opaque). Type errors never echo the value: it may be a secret.
type decoder struct {
	root map[string]any
	ps   *problemSet
	// given holds the keys some layer set: an explicit tenant_quota 0 is a
	// mistake to report, an absent one means unlimited.
	given map[string]bool
}

// lookup returns the value at a dotted path of fixed keys and whether it is set.
func (d *decoder) lookup(key string) (any, bool) {
	return lookupPath(d.root, strings.Split(key, "."))
}

// decode reads every key of the schema into a Config, in field order (the order
// of the problems).
func (d *decoder) decode() *Config {
	c := &Config{}
	d.given = map[string]bool{}
	d.fill(reflect.ValueOf(c).Elem(), "", false)
	return c
}

// fill reads the tagged fields of struct v from the keys under prefix; with
// optional, a key no layer set keeps its zero value.
func (d *decoder) fill(v reflect.Value, prefix string, optional bool) {
	for f, field := range v.Fields() {
		key := f.Tag.Get("key")
		if key == "" {
			continue
		}
		key = prefix + key
		raw, set := d.lookup(key)
		if !set && optional {
			continue
		}
		d.given[key] = set
		switch p := field.Addr().Interface().(type) {
		case *string:
			*p = d.asString(key, raw)
		case *Secret:
			*p = Secret(d.asString(key, raw))
		case *bool:
			*p = d.asBool(key, raw)
		case *int64:
			*p = d.asInt64(key, raw)
		case *int:
			*p = d.asInt(key, raw)
		case *float64:
			*p = d.asFloat(key, raw)
		case *time.Duration:
			*p = d.asDuration(key, raw)
		case *[]string:
			*p = d.asStringList(key, raw)
		case *map[string]string:
			*p = d.skuMapping(raw)
		case *map[string]SKUProfile:
			*p = d.skuProfiles(raw)
		case *TenantQuota:
			p.Set = raw != nil && d.section(key, raw, "a map with max_cpu_cores, max_memory_mb and/or max_disk_mb")
			if p.Set {
				d.fill(field, key+".", true)
			}
		case *Ingress:
			if d.section(key, raw, "a map (ingress.enabled, ingress.wildcard_domain, …)") {
				d.fill(field, key+".", false)
			}
		case *Debug:
			if d.section(key, raw, "a map (debug.chaos, debug.token)") {
				d.fill(field, key+".", false)
			}
		default:
			panic("config: no decoder for the type of " + key)
		}
	}
}

// section reports whether the section at key holds a map (or nothing); a scalar
// there is a problem saying what it should hold.
func (d *decoder) section(key string, v any, want string) bool {
	if _, ok := v.(map[string]any); ok || v == nil {
		return true
	}
	d.ps.badValue(key, "must be %s, not %s", want, kind(v))
	return false
}

// kind names a value's YAML type for messages, without its content.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case time.Time:
		return "a timestamp"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func (d *decoder) asString(key string, v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	}
	d.ps.badValue(key, "must be a string, not %s (quote it)", kind(v))
	return ""
}

func (d *decoder) asBool(key string, v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string: // from the environment
		if parsed, err := strconv.ParseBool(strings.TrimSpace(b)); err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a boolean (use true or false)", b)
		return false
	}
	d.ps.badValue(key, "must be true or false, not %s", kind(v))
	return false
}

func (d *decoder) asInt64(key string, v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n)
		}
	case float64:
		// YAML gives 512.0 and 1e20 as floats; accept only exact integers in range.
		switch {
		case math.IsNaN(n) || math.IsInf(n, 0):
			d.ps.badValue(key, "must be a finite whole number")
			return 0
		case n != math.Trunc(n):
			d.ps.badValue(key, "must be a whole number, not %v", n)
			return 0
		case math.Abs(n) < math.MaxInt64:
			return int64(n)
		}
	case string: // from the environment
		parsed, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a whole number", n)
		return 0
	default:
		d.ps.badValue(key, "must be a whole number, not %s", kind(v))
		return 0
	}
	d.ps.badValue(key, "must be a whole number within int64")
	return 0
}

// asInt reads a whole number into an int (counts, concurrency).
func (d *decoder) asInt(key string, v any) int {
	n := d.asInt64(key, v)
	if n < math.MinInt || n > math.MaxInt {
		d.ps.badValue(key, "must be a whole number within int")
		return 0
	}
	return int(n)
}

func (d *decoder) asFloat(key string, v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	case float64:
		return n
	case string: // from the environment; NaN/Inf parse and are refused by the rules
		parsed, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a number", n)
		return 0
	}
	d.ps.badValue(key, "must be a number, not %s", kind(v))
	return 0
}

// dwUnit spots the day/week units people reach for ("7d", "2w", "1d12h").
var dwUnit = regexp.MustCompile(`(?i)[0-9.][dw]`)

// asDuration parses Go duration syntax from the raw value. A bare 0 is allowed
// (the keys where zero means "default" need it); other bare numbers lack a unit.
func (d *decoder) asDuration(key string, v any) time.Duration {
	switch x := v.(type) {
	case string:
		dur, problem := parseDuration(x)
		if problem != "" {
			d.ps.badValue(key, "%s", problem)
		}
		return dur
	case int:
		if x == 0 {
			return 0
		}
		d.ps.badValue(key, "%d has no unit: use h, m or s", x)
		return 0
	}
	d.ps.badValue(key, "must be a duration such as 30s, 5m or 2h, not %s", kind(v))
	return 0
}

// parseDuration returns the duration or a problem text.
func parseDuration(raw string) (time.Duration, string) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return 0, "must be set to a duration such as 30s, 5m or 2h"
	}
	dur, err := time.ParseDuration(s)
	if err == nil {
		return dur, ""
	}
	switch {
	case dwUnit.MatchString(s):
		return 0, fmt.Sprintf("%q: use h, m or s; d and w are not valid", raw)
	case strings.Trim(s, "+-0123456789.") == "":
		return 0, fmt.Sprintf("%q has no unit: use h, m or s", raw)
	default:
		return 0, fmt.Sprintf("%q is not a duration: use Go syntax such as 90s, 5m or 2h", raw)
	}
}

func (d *decoder) asStringList(key string, v any) []string {
	switch list := v.(type) {
	case nil:
		return []string{}
	case []any:
		out := make([]string, 0, len(list))
		for i, item := range list {
			s, ok := item.(string)
			if !ok {
				d.ps.badValue(key, "entry %d must be a string, not %s", i, kind(item))
				return []string{}
			}
			out = append(out, s)
		}
		return out
	}
	d.ps.badValue(key, "must be a list of strings, not %s", kind(v))
	return []string{}
}

// sortedKeys returns m's keys in order, so problems come out deterministically.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// freeMap is v as a map with free keys (SKU ids, profile names): nil when unset,
// or when it is not a map (a problem saying what it must map).
func (d *decoder) freeMap(key string, v any, of string) map[string]any {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.ps.badValue(key, "must be a map of %s, not %s", of, kind(v))
	}
	return m
}

func (d *decoder) skuMapping(v any) map[string]string {
	out := map[string]string{}
	m := d.freeMap("sku_mapping", v, "SKU id to profile name")
	for _, sku := range sortedKeys(m) {
		out[sku] = d.asString("sku_mapping."+sku, m[sku])
	}
	return out
}

func (d *decoder) skuProfiles(v any) map[string]SKUProfile {
	out := map[string]SKUProfile{}
	m := d.freeMap("sku_profiles", v, "profile name to {cpu_cores, memory_mb, disk_mb}")
	for _, name := range sortedKeys(m) {
		key := "sku_profiles." + name
		fields, ok := m[name].(map[string]any)
		if !ok {
			d.ps.badValue(key, "must be a map with cpu_cores, memory_mb and disk_mb, not %s", kind(m[name]))
			continue
		}
		p := SKUProfile{}
		if cpu, set := fields["cpu_cores"]; set {
			p.CPUCores = d.asFloat(key+".cpu_cores", cpu)
		} else {
			d.ps.badValue(key+".cpu_cores", "is required")
		}
		if mem, set := fields["memory_mb"]; set {
			p.MemoryMB = d.asInt64(key+".memory_mb", mem)
		} else {
			d.ps.badValue(key+".memory_mb", "is required")
		}
		if disk, set := fields["disk_mb"]; set { // absent: diskless
			p.DiskMB = d.asInt64(key+".disk_mb", disk)
		}
		out[name] = p
	}
	return out
}
