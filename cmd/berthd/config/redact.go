package config

import (
	"fmt"
	"reflect"
)

// Redacted returns the configuration keyed by YAML key, fit for one startup log
// line: callback_secret, callback_secret_next and debug.token read "<redacted>"
// when set and "<unset>" when not; durations are strings such as "5m0s".
func (c *Config) Redacted() map[string]any {
	out := redacted(reflect.ValueOf(*c))
	out["config_file"] = c.File
	if !c.TenantQuota.Set {
		out["tenant_quota"] = unsetText
	}
	return out
}

// redacted is struct v's tagged fields by key: Stringers (Secret, time.Duration)
// as their text, lists and maps copied, sections nested.
func redacted(v reflect.Value) map[string]any {
	out := map[string]any{}
	for f, field := range v.Fields() {
		if key := f.Tag.Get("key"); key != "" {
			out[key] = redactedValue(field)
		}
	}
	return out
}

func redactedValue(v reflect.Value) any {
	switch x := v.Interface().(type) {
	case fmt.Stringer:
		return x.String()
	case []string:
		return append([]string{}, x...)
	}
	switch v.Kind() {
	case reflect.Struct:
		return redacted(v)
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for key, value := range v.Seq2() {
			m[key.String()] = redactedValue(value)
		}
		return m
	}
	return v.Interface()
}
