package config

import "fmt"

// shape describes which keys a config map may hold, so typos are caught.
// A nil *shape is a leaf: any value, checked later by the decoder.
type shape struct {
	fields map[string]*shape // a struct: exactly these keys
	each   *shape            // a map with free keys (profile names, SKU ids); each value has this shape
}

var skuProfileShape = &shape{fields: map[string]*shape{
	"cpu_cores": nil,
	"memory_mb": nil,
	"disk_mb":   nil,
}}

// schema is every key berthd reads. defaults.yaml must set each of them except
// tenant_quota (optional); a test holds the two in step.
var schema = &shape{fields: map[string]*shape{
	"name":                  nil,
	"listen_addr":           nil,
	"debug_listen_addr":     nil,
	"host_address":          nil,
	"host_bind_ip":          nil,
	"docker_host":           nil,
	"log_level":             nil,
	"production_mode":       nil,
	"data_dir":              nil,
	"max_store_size_mb":     nil,
	"max_request_body_size": nil,

	"tls_cert_file":            nil,
	"tls_key_file":             nil,
	"tls_client_ca_file":       nil,
	"tls_client_allowed_names": nil,

	"total_cpu_cores": nil,
	"total_memory_mb": nil,
	"total_disk_mb":   nil,

	"sku_mapping":  {each: nil},
	"sku_profiles": {each: skuProfileShape},
	"tenant_quota": {fields: map[string]*shape{
		"max_cpu_cores": nil,
		"max_memory_mb": nil,
		"max_disk_mb":   nil,
	}},
	"allowed_registries": nil,

	"callback_secret":               nil,
	"callback_secret_next":          nil,
	"callback_insecure_skip_verify": nil,
	"callback_db_path":              nil,
	"callback_max_age":              nil,

	"diagnostics_db_path": nil,
	"diagnostics_max_age": nil,

	"releases_db_path": nil,
	"releases_max_age": nil,

	"retain_on_close":                nil,
	"retention_db_path":              nil,
	"retention_max_age":              nil,
	"retention_reap_interval":        nil,
	"max_retained_leases_per_tenant": nil,
	"retention_orphan_confirmations": nil,
	"max_retained_disk_mb":           nil,

	"image_pull_timeout":          nil,
	"storage_attestation_timeout": nil,
	"container_create_timeout":    nil,
	"container_start_timeout":     nil,
	"provision_timeout":           nil,
	"reconcile_interval":          nil,
	"startup_verify_duration":     nil,
	"container_stop_timeout":      nil,

	"network_isolation":         nil,
	"container_readonly_rootfs": nil,
	"container_pids_limit":      nil,
	"container_tmpfs_size_mb":   nil,

	"runtime_refresh_max_concurrency": nil,
	"docker_max_in_flight":            nil,
	"network_pool_size":               nil,
	"docker_max_starts_in_flight":     nil,

	"volume_data_path":   nil,
	"volume_mount_path":  nil,
	"volume_filesystem":  nil,
	"min_avg_file_bytes": nil,

	"ingress": {fields: map[string]*shape{
		"enabled":                          nil,
		"wildcard_domain":                  nil,
		"entrypoint":                       nil,
		"custom_domain_cert_resolver":      nil,
		"custom_domain_middlewares":        nil,
		"custom_domain_dns_resolvers":      nil,
		"custom_domain_dns_quorum":         nil,
		"custom_domain_dns_check_disabled": nil,
	}},

	"debug": {fields: map[string]*shape{
		"chaos": nil,
		"token": nil,
	}},
}}

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
