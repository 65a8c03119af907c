package manifest

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Service is one validated tenant service. Its JSON tags are the manifest's own
// field names, so json.Marshal of {"services": lease.Services} is a stack manifest
// that Build accepts back unchanged.
type Service struct {
	Image           string                `json:"image"`
	Ports           map[string]Port       `json:"ports,omitempty"` // canonical "8080/tcp" → Port
	Env             map[string]string     `json:"env,omitempty"`
	Command         []string              `json:"command,omitempty"` // nil when absent or empty
	Args            []string              `json:"args,omitempty"`    // nil when absent or empty
	Labels          map[string]string     `json:"labels,omitempty"`
	HealthCheck     *HealthCheck          `json:"health_check,omitempty"`
	Tmpfs           []string              `json:"tmpfs,omitempty"`
	User            string                `json:"user,omitempty"`
	DependsOn       map[string]Dependency `json:"depends_on,omitempty"`
	StopGracePeriod Duration              `json:"stop_grace_period,omitempty"` // 0 when absent
	Init            *bool                 `json:"init,omitempty"`
	Expose          []string              `json:"expose,omitempty"` // canonical "80/tcp"
}

// Port is one container port, always published on an ephemeral host port.
type Port struct {
	HostPort int  `json:"host_port"` // always 0 after validation
	Ingress  bool `json:"ingress"`
}

// HealthCheck is the manifest health check.
type HealthCheck struct {
	Test        []string `json:"test"`
	Interval    Duration `json:"interval,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	StartPeriod Duration `json:"start_period,omitempty"`
	Retries     int      `json:"retries,omitempty"`
}

// Active reports whether the check runs: Test[0] is "CMD" or "CMD-SHELL". A nil
// check is not active.
func (h *HealthCheck) Active() bool {
	return h != nil && len(h.Test) > 0 && (h.Test[0] == "CMD" || h.Test[0] == "CMD-SHELL")
}

// Dependency is one depends_on entry.
type Dependency struct {
	Condition string `json:"condition"` // ConditionStarted | ConditionHealthy
}

// depends_on conditions.
const (
	ConditionStarted = "service_started"
	ConditionHealthy = "service_healthy"
)

// IngressPort returns the canonical key of the port marked ingress, if any.
func (s *Service) IngressPort() (string, bool) {
	for k, p := range s.Ports {
		if p.Ingress {
			return k, true
		}
	}
	return "", false
}

// Limits. The counts are CONTRACT.md's; the byte caps are ours, generous for real
// workloads, so that memory and messages stay bounded.
const (
	maxPorts       = 64
	maxEnv         = 256
	maxLabels      = 128
	maxTmpfs       = 4
	maxExpose      = 64
	maxArgv        = 1024     // entries of command, args, health_check.test
	maxKeyBytes    = 256      // env names, label keys
	maxValueBytes  = 32 << 10 // env values, label values, each argv string
	maxPathBytes   = 1024     // tmpfs paths
	maxUserPart    = 32       // user or group name
	maxNumericID   = math.MaxInt32
	maxRetries     = math.MaxInt32
	minStopGrace   = time.Second
	maxStopGrace   = 120 * time.Second
	minHealthDelay = time.Millisecond // Docker refuses non-zero health check durations below 1 ms
)

var (
	reservedEnvPrefixes   = []string{"LD_", "FRED_", "DOCKER_"}
	reservedLabelPrefixes = []string{"fred.", "traefik.", "com.docker.compose."}
	// tmpfs targets berth mounts itself, and kernel filesystems.
	reservedTmpfs      = []string{"/", "/tmp", "/run"}
	reservedTmpfsTrees = []string{"/proc", "/sys", "/dev"}
)

// serviceDecoder decodes one service node; where prefixes every message.
type serviceDecoder struct {
	where string // `service "web"`
	stack bool
}

func (d *serviceDecoder) fail(format string, args ...any) error {
	return invalid("%s: %s", d.where, fmt.Sprintf(format, args...))
}

// decodeService validates one service object. A null field counts as absent.
func decodeService(name string, n *node, stack bool) (*Service, error) {
	d := &serviceDecoder{where: "service " + strconv.Quote(name), stack: stack}
	if n.kind != kindObject {
		return nil, d.fail("must be an object, not %s", n.kind)
	}
	s := &Service{}
	err := n.eachMember(func(key string, v *node) (err error) {
		switch key {
		case "image":
			err = d.image(v, s)
		case "ports":
			err = d.ports(v, s)
		case "env":
			s.Env, err = d.stringMap(v, "env", maxEnv, envNameProblem)
		case "command":
			s.Command, err = d.stringList(v, "command", maxArgv, maxValueBytes)
		case "args":
			s.Args, err = d.stringList(v, "args", maxArgv, maxValueBytes)
		case "labels":
			s.Labels, err = d.stringMap(v, "labels", maxLabels, labelKeyProblem)
		case "health_check":
			s.HealthCheck, err = d.healthCheck(v)
		case "tmpfs":
			s.Tmpfs, err = d.tmpfs(v)
		case "user":
			s.User, err = d.user(v)
		case "depends_on":
			s.DependsOn, err = d.dependsOn(v)
		case "stop_grace_period":
			s.StopGracePeriod, err = d.stopGracePeriod(v)
		case "init":
			if v.kind != kindBool {
				return d.fail("init must be a boolean, not %s", v.kind)
			}
			s.Init = &v.b
		case "expose":
			s.Expose, err = d.expose(v)
		default:
			return d.fail("unknown field %s", excerpt(key))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Image == "" {
		return nil, d.fail("image is required")
	}
	return s, nil
}

func (d *serviceDecoder) image(v *node, s *Service) error {
	if v.kind != kindString {
		return d.fail("image must be a string, not %s", v.kind)
	}
	if _, reason := parseReference(v.str); reason != "" {
		return d.fail("image %s is not a valid reference: %s", excerpt(v.str), reason)
	}
	s.Image = v.str
	return nil
}

// parsePortSpec reads "<port>/tcp", "<port>/udp" or a bare "<port>" (tcp, as in
// Dockerfile EXPOSE and Compose) and returns the canonical "<port>/<proto>".
// Leading zeros and upper-case protocols are refused so canonical forms are unique.
func parsePortSpec(s string) (string, bool) {
	num, proto, hasProto := strings.Cut(s, "/")
	if !hasProto {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" {
		return "", false
	}
	if num == "" || len(num) > 5 || num[0] == '0' || strings.Trim(num, "0123456789") != "" {
		return "", false
	}
	if p, _ := strconv.Atoi(num); p > 65535 {
		return "", false
	}
	return num + "/" + proto, true
}

func (d *serviceDecoder) ports(v *node, s *Service) error {
	if v.kind != kindObject {
		return d.fail("ports must be an object such as {\"8080/tcp\": {}}, not %s", v.kind)
	}
	if len(v.keys) > maxPorts {
		return d.fail("ports: at most %d ports are allowed", maxPorts)
	}
	s.Ports = make(map[string]Port, len(v.keys))
	ingress := ""
	for i, key := range v.keys {
		canon, ok := parsePortSpec(key)
		if !ok {
			return d.fail("ports: key %s must be \"<1-65535>/tcp\" or \"<1-65535>/udp\"", excerpt(key))
		}
		if _, dup := s.Ports[canon]; dup {
			return d.fail("ports: %s is listed twice", canon)
		}
		p, err := d.port(canon, v.kids[i])
		if err != nil {
			return err
		}
		if p.Ingress {
			if strings.HasSuffix(canon, "/udp") {
				return d.fail("ports: %s: ingress is only possible on a TCP port", canon)
			}
			if ingress != "" {
				return d.fail("ports: at most one port may set ingress (%s and %s do)", ingress, canon)
			}
			ingress = canon
		}
		s.Ports[canon] = p
	}
	return nil
}

func (d *serviceDecoder) port(canon string, v *node) (Port, error) {
	var p Port
	if v.kind == kindNull {
		return p, nil
	}
	if v.kind != kindObject {
		return p, d.fail("ports: %s must be an object, not %s", canon, v.kind)
	}
	err := v.eachMember(func(key string, f *node) error {
		switch key {
		case "host_port":
			if f.kind != kindNumber {
				return d.fail("ports: %s: host_port must be a number, not %s", canon, f.kind)
			}
			if n, err := strconv.ParseInt(f.str, 10, 64); err != nil || n != 0 {
				return d.fail("ports: %s: host_port must be 0; fixed host ports are not allowed, the host port is assigned", canon)
			}
		case "ingress":
			if f.kind != kindBool {
				return d.fail("ports: %s: ingress must be a boolean, not %s", canon, f.kind)
			}
			p.Ingress = f.b
		default:
			return d.fail("ports: %s: unknown field %s", canon, excerpt(key))
		}
		return nil
	})
	return p, err
}

// stringMap decodes an object of string values whose keys pass keyProblem.
func (d *serviceDecoder) stringMap(v *node, field string, maxEntries int, keyProblem func(string) string) (map[string]string, error) {
	if v.kind != kindObject {
		return nil, d.fail("%s must be an object of strings, not %s", field, v.kind)
	}
	if len(v.keys) > maxEntries {
		return nil, d.fail("%s: at most %d entries are allowed", field, maxEntries)
	}
	m := make(map[string]string, len(v.keys))
	for i, key := range v.keys {
		if problem := keyProblem(key); problem != "" {
			return nil, d.fail("%s: name %s %s", field, excerpt(key), problem)
		}
		val := v.kids[i]
		if val.kind != kindString {
			return nil, d.fail("%s %s: value must be a string, not %s", field, excerpt(key), val.kind)
		}
		if problem := stringProblem(val.str, maxValueBytes); problem != "" {
			return nil, d.fail("%s %s: value %s", field, excerpt(key), problem)
		}
		m[key] = val.str
	}
	return m, nil
}

// stringProblem checks the rules every free-form manifest string shares.
func stringProblem(s string, maxBytes int) string {
	switch {
	case len(s) > maxBytes:
		return "is longer than " + strconv.Itoa(maxBytes) + " bytes"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain NUL"
	}
	return ""
}

func envNameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > maxKeyBytes:
		return "is longer than " + strconv.Itoa(maxKeyBytes) + " bytes"
	case strings.ContainsAny(name, "=\x00"):
		return "must not contain '=' or NUL"
	case asciiEqualFold(name, "PATH"):
		return "is reserved: PATH cannot be overridden"
	case hasAnyPrefixFold(name, reservedEnvPrefixes):
		return "is reserved: names starting with LD_, FRED_ or DOCKER_ are not allowed"
	}
	return ""
}

func labelKeyProblem(key string) string {
	switch {
	case key == "":
		return "must not be empty"
	case len(key) > maxKeyBytes:
		return "is longer than " + strconv.Itoa(maxKeyBytes) + " bytes"
	case strings.IndexByte(key, 0) >= 0:
		return "must not contain NUL"
	case hasAnyPrefixFold(key, reservedLabelPrefixes):
		return "is reserved: the fred., traefik. and com.docker.compose. namespaces are not allowed"
	}
	return ""
}

// asciiEqualFold compares with ASCII-only case folding: environment and label
// names are bytes to the programs reading them, so Unicode folds such as the
// Kelvin sign matching "k" must not make a different name look reserved.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if asciiLower(a[i]) != asciiLower(b[i]) {
			return false
		}
	}
	return true
}

func hasAnyPrefixFold(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return len(s) >= len(p) && asciiEqualFold(s[:len(p)], p) })
}

func asciiLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// stringList decodes an array of strings; an empty array is returned as nil.
func (d *serviceDecoder) stringList(v *node, field string, maxEntries, maxBytes int) ([]string, error) {
	if v.kind != kindArray {
		return nil, d.fail("%s must be an array of strings, not %s", field, v.kind)
	}
	if len(v.kids) > maxEntries {
		return nil, d.fail("%s: at most %d entries are allowed", field, maxEntries)
	}
	if len(v.kids) == 0 {
		return nil, nil
	}
	out := make([]string, len(v.kids))
	for i, e := range v.kids {
		if e.kind != kindString {
			return nil, d.fail("%s[%d] must be a string, not %s", field, i, e.kind)
		}
		if problem := stringProblem(e.str, maxBytes); problem != "" {
			return nil, d.fail("%s[%d] %s", field, i, problem)
		}
		out[i] = e.str
	}
	return out, nil
}

func (d *serviceDecoder) healthCheck(v *node) (*HealthCheck, error) {
	if v.kind != kindObject {
		return nil, d.fail("health_check must be an object, not %s", v.kind)
	}
	h := &HealthCheck{}
	err := v.eachMember(func(key string, f *node) (err error) {
		switch key {
		case "test":
			h.Test, err = d.stringList(f, "health_check.test", maxArgv, maxValueBytes)
		case "interval":
			h.Interval, err = d.healthDuration(f, key)
		case "timeout":
			h.Timeout, err = d.healthDuration(f, key)
		case "start_period":
			h.StartPeriod, err = d.healthDuration(f, key)
		case "retries":
			h.Retries, err = d.retries(f)
		default:
			return d.fail("health_check: unknown field %s", excerpt(key))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	const forms = `["CMD", executable, args...], ["CMD-SHELL", "command"] or ["NONE"]`
	t := h.Test
	switch {
	case len(t) == 0:
		return nil, d.fail("health_check.test is required: %s", forms)
	case t[0] == "CMD":
		if len(t) < 2 || t[1] == "" {
			return nil, d.fail("health_check.test: CMD needs a non-empty executable after it")
		}
	case t[0] == "CMD-SHELL":
		if len(t) != 2 || t[1] == "" {
			return nil, d.fail("health_check.test: CMD-SHELL takes exactly one non-empty command string")
		}
	case t[0] == "NONE":
		if len(t) != 1 {
			return nil, d.fail("health_check.test: NONE takes no arguments")
		}
	default:
		return nil, d.fail("health_check.test must be %s", forms)
	}
	return h, nil
}

func (d *serviceDecoder) healthDuration(v *node, field string) (Duration, error) {
	dur, reason := parseDuration(v)
	if reason != "" {
		return 0, d.fail("health_check.%s %s", field, reason)
	}
	if dur != 0 && dur < minHealthDelay {
		return 0, d.fail("health_check.%s must be 0 or at least 1ms", field)
	}
	return Duration(dur), nil
}

func (d *serviceDecoder) retries(v *node) (int, error) {
	if v.kind != kindNumber {
		return 0, d.fail("health_check.retries must be a number, not %s", v.kind)
	}
	n, err := strconv.ParseInt(v.str, 10, 64)
	if err != nil || n < 0 || n > maxRetries {
		return 0, d.fail("health_check.retries must be a whole number from 0 to %d", maxRetries)
	}
	return int(n), nil
}

func (d *serviceDecoder) tmpfs(v *node) ([]string, error) {
	list, err := d.stringList(v, "tmpfs", maxTmpfs, maxPathBytes)
	if err != nil {
		return nil, err
	}
	for i, p := range list {
		if problem := tmpfsProblem(p); problem != "" {
			return nil, d.fail("tmpfs[%d] %s %s", i, excerpt(p), problem)
		}
		if slices.Contains(list[:i], p) {
			return nil, d.fail("tmpfs[%d] %s is listed twice", i, excerpt(p))
		}
	}
	return list, nil
}

func tmpfsProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must be an absolute path"
	case path.Clean(p) != p:
		return "must be a clean path (no trailing slash, '.', '..' or '//')"
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ':' }):
		// ':' would be read as the start of mount options.
		return "must not contain ':' or control characters"
	}
	if slices.Contains(reservedTmpfs, p) {
		return "is reserved: /, /tmp and /run are mounted by the provider"
	}
	if slices.ContainsFunc(reservedTmpfsTrees, func(t string) bool { return p == t || strings.HasPrefix(p, t+"/") }) {
		return "is reserved: /proc, /sys and /dev (and paths under them) cannot be mounted over"
	}
	return ""
}

func (d *serviceDecoder) user(v *node) (string, error) {
	if v.kind != kindString {
		return "", d.fail("user must be a string, not %s", v.kind)
	}
	u := v.str
	if u == "" {
		return "", nil
	}
	name, group, hasGroup := strings.Cut(u, ":")
	if !validUserPart(name) || (hasGroup && !validUserPart(group)) {
		return "", d.fail("user %s must be uid[:gid] or name[:group] (ids 0-%d; names match ^[a-z_][a-z0-9_-]*\\$?$, at most %d characters)",
			excerpt(u), maxNumericID, maxUserPart)
	}
	return u, nil
}

// validUserPart accepts a numeric id or a POSIX-style user/group name. Docker
// resolves either part independently, so "1000:staff" and "app:1000" are fine.
func validUserPart(p string) bool {
	if p == "" || len(p) > maxUserPart {
		return false
	}
	if p[0] >= '0' && p[0] <= '9' {
		n, err := strconv.ParseUint(p, 10, 64)
		return err == nil && n <= maxNumericID
	}
	if c := p[0]; !(c == '_' || ('a' <= c && c <= 'z')) {
		return false
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9'):
		case c == '$' && i == len(p)-1:
		default:
			return false
		}
	}
	return true
}

func (d *serviceDecoder) dependsOn(v *node) (map[string]Dependency, error) {
	if !d.stack {
		return nil, d.fail("depends_on is only allowed in the stack form (a manifest with \"services\")")
	}
	if v.kind != kindObject {
		return nil, d.fail("depends_on must be an object such as {\"db\": {\"condition\": \"service_started\"}}, not %s", v.kind)
	}
	deps := make(map[string]Dependency, len(v.keys))
	for i, target := range v.keys {
		if !validServiceName(target) {
			return nil, d.fail("depends_on: %s is not a valid service name", excerpt(target))
		}
		dep := Dependency{Condition: ConditionStarted}
		e := v.kids[i]
		switch e.kind {
		case kindNull:
		case kindObject:
			for j, key := range e.keys {
				if key != "condition" {
					return nil, d.fail("depends_on %q: unknown field %s", target, excerpt(key))
				}
				c := e.kids[j]
				if c.kind == kindNull {
					continue
				}
				if c.kind != kindString || (c.str != ConditionStarted && c.str != ConditionHealthy) {
					return nil, d.fail("depends_on %q: condition must be %q or %q", target, ConditionStarted, ConditionHealthy)
				}
				dep.Condition = c.str
			}
		default:
			return nil, d.fail("depends_on %q must be an object, not %s", target, e.kind)
		}
		deps[target] = dep
	}
	return deps, nil
}

func (d *serviceDecoder) stopGracePeriod(v *node) (Duration, error) {
	dur, reason := parseDuration(v)
	if reason != "" {
		return 0, d.fail("stop_grace_period %s", reason)
	}
	if dur < minStopGrace || dur > maxStopGrace {
		return 0, d.fail("stop_grace_period must be between 1s and 120s")
	}
	return Duration(dur), nil
}

func (d *serviceDecoder) expose(v *node) ([]string, error) {
	list, err := d.stringList(v, "expose", maxExpose, maxKeyBytes)
	if err != nil {
		return nil, err
	}
	for i, e := range list {
		canon, ok := parsePortSpec(e)
		if !ok {
			return nil, d.fail("expose[%d] %s must be \"<1-65535>\", \"<1-65535>/tcp\" or \"<1-65535>/udp\" (no ranges)", i, excerpt(e))
		}
		if slices.Contains(list[:i], canon) { // the entries before are canonical already
			return nil, d.fail("expose: %s is listed twice", canon)
		}
		list[i] = canon
	}
	return list, nil
}
