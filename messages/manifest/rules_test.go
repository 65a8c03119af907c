package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// ruleRow is one manifest rule case. kind nil means the manifest is accepted.
type ruleRow struct {
	name    string
	payload string
	items   []messages.LeaseItem // nil: one unnamed item
	kind    error
	msg     string // substring the refusal must contain
}

var (
	invalidM   = messages.ErrInvalidManifest
	notAllowed = messages.ErrImageNotAllowed
	badReq     = messages.ErrBadRequest
)

func runRules(t *testing.T, rows []ruleRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			items := r.items
			if items == nil {
				items = loneItem()
			}
			lease, err := Build([]byte(r.payload), items, testOpts)
			if r.kind == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(lease.Services) != len(lease.Items) {
					t.Fatalf("%d services for %d items", len(lease.Services), len(lease.Items))
				}
				return
			}
			assertRefusal(t, err, r.kind, r.msg)
		})
	}
}

func TestBuild_JSONShape(t *testing.T) {
	runRules(t, []ruleRow{
		{name: "minimal flat accepted", payload: flat("")},
		{name: "trailing whitespace accepted", payload: flat("") + "\n\t "},
		{name: "null field counts as absent", payload: flat(`"env":null,"ports":null,"health_check":null`)},
		{name: "empty payload", payload: "", kind: invalidM, msg: "empty"},
		{name: "array top level", payload: `[{"image":"nginx"}]`, kind: invalidM, msg: "JSON object"},
		{name: "string top level", payload: `"nginx"`, kind: invalidM, msg: "JSON object"},
		{name: "null top level", payload: `null`, kind: invalidM, msg: "JSON object"},
		{name: "truncated JSON", payload: `{"image":`, kind: invalidM, msg: "not valid JSON"},
		{name: "garbage", payload: `{image: nginx}`, kind: invalidM, msg: "not valid JSON"},
		{name: "trailing object", payload: flat("") + `{}`, kind: invalidM, msg: "trailing data"},
		{name: "trailing garbage", payload: flat("") + `x`, kind: invalidM, msg: "trailing data"},
		{name: "duplicate field", payload: `{"image":"nginx","image":"evil.example/x"}`, kind: invalidM, msg: `duplicate key "image"`},
		{name: "duplicate env key", payload: flat(`"env":{"A":"1","A":"2"}`), kind: invalidM, msg: `duplicate key "A"`},
		{name: "field names are case-sensitive", payload: `{"Image":"nginx"}`, kind: invalidM, msg: `unknown field "Image"`},
		{name: "unknown flat field", payload: flat(`"privileged":true`), kind: invalidM, msg: `unknown field "privileged"`},
		{name: "unknown stack service field", payload: stack(`"app":{"image":"nginx","volumes":["/x:/y"]}`), kind: invalidM, msg: `unknown field "volumes"`},
		{name: "unknown stack top-level field", payload: `{"version":"3","services":{"app":{"image":"nginx"}}}`, kind: invalidM, msg: `unknown top-level field "version"`},
		{name: "invalid UTF-8", payload: "{\"image\":\"nginx\",\"env\":{\"A\":\"\xff\"}}", kind: invalidM, msg: "UTF-8"},
		{name: "nesting too deep", payload: flat(`"labels":` + strings.Repeat("[", 40) + strings.Repeat("]", 40)), kind: invalidM, msg: "nests deeper"},
		{name: "too many JSON values", payload: flat(`"command":` + jsonArray(maxNodes+1, func(int) string { return "0" })), kind: invalidM, msg: "JSON values"},
		{name: "over 1 MiB", payload: flat(`"env":{"A":"` + strings.Repeat("x", MaxPayloadBytes) + `"}`), kind: invalidM, msg: "exceeds"},
	})
}

func TestBuild_Forms(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	long64 := strings.Repeat("a", 64)
	runRules(t, []ruleRow{
		{name: "flat with lone unnamed item", payload: flat("")},
		{name: "flat with lone item named app", payload: flat(""), items: named("app")},
		{name: "flat with item named web", payload: flat(""), items: named("web"), kind: invalidM, msg: `flat manifest defines only the service "app"`},
		{name: "flat with two items", payload: flat(""), items: named("app", "db"), kind: invalidM, msg: `"db" has no service`},
		{name: "stack app with lone unnamed item", payload: stack(`"app":{"image":"nginx"}`)},
		{name: "stack two services", payload: stack(`"web":{"image":"nginx"}`, `"db":{"image":"ghcr.io/o/db:1"}`), items: named("web", "db")},
		{name: "stack service without item", payload: stack(`"web":{"image":"nginx"}`, `"db":{"image":"nginx"}`), items: named("web"), kind: invalidM, msg: `service "db" has no lease item`},
		{name: "item without stack service", payload: stack(`"web":{"image":"nginx"}`), items: named("web", "db"), kind: invalidM, msg: `"db" has no service`},
		{name: "stack with lone unnamed item but no app", payload: stack(`"web":{"image":"nginx"}`), kind: invalidM, msg: `"app" has no service`},
		{name: "services empty", payload: `{"services":{}}`, kind: invalidM, msg: "at least one service"},
		{name: "services not an object", payload: `{"services":["app"]}`, kind: invalidM, msg: "at least one service"},
		{name: "service not an object", payload: stack(`"app":"nginx"`), kind: invalidM, msg: "must be an object"},
		{name: "service name 63 chars", payload: stack(`"` + long63 + `":{"image":"nginx"}`), items: named(long63)},
		{name: "service name 64 chars", payload: stack(`"` + long64 + `":{"image":"nginx"}`), items: named("app"), kind: invalidM, msg: "at most 63"},
		{name: "service name uppercase", payload: stack(`"Web":{"image":"nginx"}`), items: named("web"), kind: invalidM, msg: `service name "Web"`},
		{name: "service name leading dash", payload: stack(`"-web":{"image":"nginx"}`), items: named("web"), kind: invalidM, msg: "service name"},
		{name: "service name underscore", payload: stack(`"web_1":{"image":"nginx"}`), items: named("web"), kind: invalidM, msg: "service name"},
		{name: "depends_on in flat form", payload: flat(`"depends_on":{"db":{}}`), kind: invalidM, msg: "only allowed in the stack form"},
	})
}

func TestBuild_Items(t *testing.T) {
	q := func(pairs ...any) []messages.LeaseItem {
		var out []messages.LeaseItem
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, messages.LeaseItem{SKU: "s", ServiceName: pairs[i].(string), Quantity: pairs[i+1].(int)})
		}
		return out
	}
	two := stack(`"web":{"image":"nginx"}`, `"db":{"image":"nginx"}`)
	many := make([]messages.LeaseItem, MaxItems+1)
	for i := range many {
		many[i] = messages.LeaseItem{SKU: "s", ServiceName: fmt.Sprintf("s%d", i)}
	}
	runRules(t, []ruleRow{
		{name: "empty items", payload: flat(""), items: []messages.LeaseItem{}, kind: badReq, msg: "items must not be empty"},
		{name: "quantity 0 accepted", payload: two, items: q("web", 0, "db", 1)},
		{name: "quantity 1024 accepted", payload: two, items: q("web", 1024, "db", 0)},
		{name: "quantity negative", payload: two, items: q("web", -1, "db", 1), kind: badReq, msg: "items[0]: quantity"},
		{name: "quantity 1025", payload: two, items: q("web", 1025, "db", 1), kind: badReq, msg: "items[0]: quantity"},
		{name: "total 1025", payload: two, items: q("web", 1024, "db", 1), kind: badReq, msg: "total quantity"},
		{name: "mixed named and unnamed", payload: two, items: q("web", 1, "", 1), kind: badReq, msg: "cannot be mixed"},
		{name: "two unnamed items", payload: flat(""), items: q("", 1, "", 1), kind: badReq, msg: "service_name is required"},
		{name: "duplicate service names", payload: two, items: q("web", 1, "web", 1), kind: badReq, msg: `"web" appears more than once`},
		{name: "invalid service_name", payload: two, items: q("Web", 1, "db", 1), kind: badReq, msg: `service_name "Web"`},
		{name: "too many items", payload: flat(""), items: many, kind: badReq, msg: "at most 1024 items"},
		{name: "items checked before manifest", payload: `not json`, items: q("web", 1, "", 1), kind: badReq, msg: "cannot be mixed"},
	})
}

func TestBuild_Image(t *testing.T) {
	img := func(ref string) string { return fmt.Sprintf(`{"image":%q}`, ref) }
	runRules(t, []ruleRow{
		{name: "bare docker hub name", payload: img("nginx")},
		{name: "docker hub with tag", payload: img("library/nginx:1.27")},
		{name: "docker.io explicit", payload: img("docker.io/nginx")},
		{name: "index.docker.io folds to docker.io", payload: img("index.docker.io/library/nginx")},
		{name: "ghcr with tag", payload: img("ghcr.io/o/a:v1")},
		{name: "local registry", payload: img("127.0.0.1:5000/berth/workload:test")},
		{name: "digest", payload: img("nginx@sha256:" + strings.Repeat("a", 64))},
		{name: "missing image", payload: `{"env":{"A":"1"}}`, kind: invalidM, msg: "image is required"},
		{name: "null image", payload: `{"image":null}`, kind: invalidM, msg: "image is required"},
		{name: "empty image", payload: img(""), kind: invalidM, msg: "it is empty"},
		{name: "image not a string", payload: `{"image":42}`, kind: invalidM, msg: "image must be a string"},
		{name: "uppercase repository", payload: img("NGINX"), kind: invalidM, msg: "lowercase"},
		{name: "space in image", payload: img("ngin x"), kind: invalidM, msg: "not a valid reference"},
		{name: "empty tag", payload: img("nginx:"), kind: invalidM, msg: "tag"},
		{name: "bad digest", payload: img("nginx@sha256:abc"), kind: invalidM, msg: "digest"},
		{name: "image over 512 bytes", payload: img("ghcr.io/" + strings.Repeat("a", 510)), kind: invalidM, msg: "longer than 512"},
		{name: "registry not allowed", payload: img("quay.io/o/a:v1"), kind: notAllowed, msg: `registry "quay.io"`},
		{name: "localhost not allowed", payload: img("localhost:5000/x"), kind: notAllowed, msg: `"localhost:5000"`},
		{name: "not-allowed image in stack", payload: stack(`"web":{"image":"nginx"}`, `"db":{"image":"quay.io/db"}`), items: named("web", "db"), kind: notAllowed, msg: `service "db"`},
		{name: "invalid manifest wins over registry", payload: stack(`"web":{"image":"quay.io/x"}`, `"db":{"image":"nginx","tmpfs":["/"]}`), items: named("web", "db"), kind: invalidM, msg: "tmpfs"},
	})
}

func TestBuild_Ports(t *testing.T) {
	runRules(t, []ruleRow{
		{name: "tcp port", payload: flat(`"ports":{"8080/tcp":{}}`)},
		{name: "udp port with host_port 0", payload: flat(`"ports":{"53/udp":{"host_port":0}}`)},
		{name: "bare number is tcp", payload: flat(`"ports":{"80":{"ingress":true}}`)},
		{name: "null port value", payload: flat(`"ports":{"80/tcp":null}`)},
		{name: "64 ports", payload: flat(`"ports":` + portsObject(64))},
		{name: "65 ports", payload: flat(`"ports":` + portsObject(65)), kind: invalidM, msg: "at most 64 ports"},
		{name: "not an object", payload: flat(`"ports":["80/tcp"]`), kind: invalidM, msg: "ports must be an object"},
		{name: "named port", payload: flat(`"ports":{"http":{}}`), kind: invalidM, msg: `key "http"`},
		{name: "port 0", payload: flat(`"ports":{"0/tcp":{}}`), kind: invalidM, msg: `key "0/tcp"`},
		{name: "port 65536", payload: flat(`"ports":{"65536/tcp":{}}`), kind: invalidM, msg: `key "65536/tcp"`},
		{name: "leading zero", payload: flat(`"ports":{"080/tcp":{}}`), kind: invalidM, msg: `key "080/tcp"`},
		{name: "sctp", payload: flat(`"ports":{"80/sctp":{}}`), kind: invalidM, msg: `key "80/sctp"`},
		{name: "uppercase protocol", payload: flat(`"ports":{"80/TCP":{}}`), kind: invalidM, msg: `key "80/TCP"`},
		{name: "range", payload: flat(`"ports":{"80-90/tcp":{}}`), kind: invalidM, msg: `key "80-90/tcp"`},
		{name: "same port twice after normalisation", payload: flat(`"ports":{"80":{},"80/tcp":{}}`), kind: invalidM, msg: "80/tcp is listed twice"},
		{name: "fixed host port", payload: flat(`"ports":{"80/tcp":{"host_port":8080}}`), kind: invalidM, msg: "host_port must be 0"},
		{name: "host_port as string", payload: flat(`"ports":{"80/tcp":{"host_port":"0"}}`), kind: invalidM, msg: "host_port must be a number"},
		{name: "one ingress tcp", payload: flat(`"ports":{"80/tcp":{"ingress":true},"9090/tcp":{"ingress":false}}`)},
		{name: "two ingress ports", payload: flat(`"ports":{"80/tcp":{"ingress":true},"8080/tcp":{"ingress":true}}`), kind: invalidM, msg: "at most one port may set ingress"},
		{name: "ingress on udp", payload: flat(`"ports":{"53/udp":{"ingress":true}}`), kind: invalidM, msg: "only possible on a TCP port"},
		{name: "ingress not bool", payload: flat(`"ports":{"80/tcp":{"ingress":"yes"}}`), kind: invalidM, msg: "ingress must be a boolean"},
		{name: "unknown port field", payload: flat(`"ports":{"80/tcp":{"protocol":"tcp"}}`), kind: invalidM, msg: `unknown field "protocol"`},
	})
}

func portsObject(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"%d/tcp":{}`, 1000+i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestBuild_Env(t *testing.T) {
	env := func(k, v string) string { return flat(fmt.Sprintf(`"env":{%q:%q}`, k, v)) }
	runRules(t, []ruleRow{
		{name: "plain", payload: env("FOO", "bar")},
		{name: "empty value", payload: env("FOO", "")},
		{name: "PATH-like but not PATH", payload: env("MY_PATH", "/x")},
		{name: "PATHX", payload: env("PATHX", "/x")},
		{name: "LD_ not a prefix", payload: env("OLD_X", "1")},
		{name: "256 entries", payload: flat(`"env":` + jsonObject(256, "E", `"v"`))},
		{name: "257 entries", payload: flat(`"env":` + jsonObject(257, "E", `"v"`)), kind: invalidM, msg: "at most 256"},
		{name: "value of 32 KiB", payload: env("BIG", strings.Repeat("x", 32<<10))},
		{name: "value over 32 KiB", payload: env("BIG", strings.Repeat("x", 32<<10+1)), kind: invalidM, msg: "longer than 32768"},
		{name: "not an object", payload: flat(`"env":["A=1"]`), kind: invalidM, msg: "env must be an object"},
		{name: "empty name", payload: env("", "x"), kind: invalidM, msg: "must not be empty"},
		{name: "name with =", payload: env("A=B", "x"), kind: invalidM, msg: "'='"},
		{name: "name with NUL", payload: flat(`"env":{"A\u0000B":"x"}`), kind: invalidM, msg: "NUL"},
		{name: "name over 256 bytes", payload: env(strings.Repeat("N", 257), "x"), kind: invalidM, msg: "longer than 256"},
		{name: "PATH", payload: env("PATH", "/evil"), kind: invalidM, msg: "PATH cannot be overridden"},
		{name: "path lowercase", payload: env("path", "/evil"), kind: invalidM, msg: "PATH cannot be overridden"},
		{name: "Path mixed case", payload: env("Path", "/evil"), kind: invalidM, msg: "PATH cannot be overridden"},
		{name: "LD_PRELOAD", payload: env("LD_PRELOAD", "/x.so"), kind: invalidM, msg: "reserved"},
		{name: "ld_library_path", payload: env("ld_library_path", "/x"), kind: invalidM, msg: "reserved"},
		{name: "FRED_X", payload: env("FRED_LEASE", "x"), kind: invalidM, msg: "reserved"},
		{name: "Fred_x", payload: env("Fred_x", "x"), kind: invalidM, msg: "reserved"},
		{name: "DOCKER_HOST", payload: env("DOCKER_HOST", "tcp://x"), kind: invalidM, msg: "reserved"},
		{name: "docker_host", payload: env("docker_host", "tcp://x"), kind: invalidM, msg: "reserved"},
		{name: "value with NUL", payload: flat(`"env":{"A":"x\u0000y"}`), kind: invalidM, msg: "NUL"},
		{name: "value a number", payload: flat(`"env":{"PORT":8080}`), kind: invalidM, msg: "value must be a string"},
	})
}

func TestBuild_CommandArgs(t *testing.T) {
	runRules(t, []ruleRow{
		{name: "command", payload: flat(`"command":["/bin/sh","-c","echo hi"]`)},
		{name: "args", payload: flat(`"args":["serve","--port","8080",""]`)},
		{name: "empty arrays", payload: flat(`"command":[],"args":[]`)},
		{name: "1024 args", payload: flat(`"args":` + jsonArray(1024, func(int) string { return `"a"` }))},
		{name: "1025 args", payload: flat(`"args":` + jsonArray(1025, func(int) string { return `"a"` })), kind: invalidM, msg: "args: at most 1024"},
		{name: "command as string", payload: flat(`"command":"/bin/sh -c x"`), kind: invalidM, msg: "command must be an array of strings"},
		{name: "args element number", payload: flat(`"args":["a",1]`), kind: invalidM, msg: "args[1] must be a string"},
		{name: "command element NUL", payload: flat(`"command":["a\u0000b"]`), kind: invalidM, msg: "command[0] must not contain NUL"},
		{name: "args element too long", payload: flat(`"args":["` + strings.Repeat("a", 32<<10+1) + `"]`), kind: invalidM, msg: "args[0] is longer"},
	})
}

func TestBuild_Labels(t *testing.T) {
	label := func(k string) string { return flat(fmt.Sprintf(`"labels":{%q:"v"}`, k)) }
	runRules(t, []ruleRow{
		{name: "plain", payload: label("app.tier")},
		{name: "fred without dot", payload: label("fredx.y")},
		{name: "compose without trailing dot", payload: label("com.docker.compose")},
		{name: "128 labels", payload: flat(`"labels":` + jsonObject(128, "l", `"v"`))},
		{name: "129 labels", payload: flat(`"labels":` + jsonObject(129, "l", `"v"`)), kind: invalidM, msg: "at most 128"},
		{name: "fred.", payload: label("fred.managed"), kind: invalidM, msg: "reserved"},
		{name: "FRED. uppercase", payload: label("FRED.lease_uuid"), kind: invalidM, msg: "reserved"},
		{name: "traefik.", payload: label("traefik.enable"), kind: invalidM, msg: "reserved"},
		{name: "Traefik. mixed case", payload: label("Traefik.http.routers.x.rule"), kind: invalidM, msg: "reserved"},
		{name: "com.docker.compose.", payload: label("com.docker.compose.project"), kind: invalidM, msg: "reserved"},
		{name: "COM.DOCKER.COMPOSE.", payload: label("COM.DOCKER.COMPOSE.service"), kind: invalidM, msg: "reserved"},
		{name: "empty key", payload: label(""), kind: invalidM, msg: "must not be empty"},
		{name: "value not string", payload: flat(`"labels":{"a":true}`), kind: invalidM, msg: "value must be a string"},
		{name: "not an object", payload: flat(`"labels":"a=b"`), kind: invalidM, msg: "labels must be an object"},
	})
}

func TestBuild_HealthCheck(t *testing.T) {
	hc := func(body string) string { return flat(`"health_check":{` + body + `}`) }
	runRules(t, []ruleRow{
		{name: "CMD", payload: hc(`"test":["CMD","curl","-f","http://localhost/"]`)},
		{name: "CMD-SHELL", payload: hc(`"test":["CMD-SHELL","curl -f http://localhost/ || exit 1"]`)},
		{name: "NONE", payload: hc(`"test":["NONE"]`)},
		{name: "all fields", payload: hc(`"test":["CMD","true"],"interval":"10s","timeout":"1m30s","start_period":0,"retries":3`)},
		{name: "durations as nanoseconds", payload: hc(`"test":["CMD","true"],"interval":1000000000,"timeout":5000000,"start_period":"0s"`)},
		{name: "retries 0", payload: hc(`"test":["CMD","true"],"retries":0`)},
		{name: "CMD without executable", payload: hc(`"test":["CMD"]`), kind: invalidM, msg: "CMD needs a non-empty executable"},
		{name: "CMD with empty executable", payload: hc(`"test":["CMD",""]`), kind: invalidM, msg: "CMD needs a non-empty executable"},
		{name: "CMD-SHELL without command", payload: hc(`"test":["CMD-SHELL"]`), kind: invalidM, msg: "CMD-SHELL takes exactly one"},
		{name: "CMD-SHELL two strings", payload: hc(`"test":["CMD-SHELL","a","b"]`), kind: invalidM, msg: "CMD-SHELL takes exactly one"},
		{name: "NONE with argument", payload: hc(`"test":["NONE","x"]`), kind: invalidM, msg: "NONE takes no arguments"},
		{name: "lowercase cmd", payload: hc(`"test":["cmd","true"]`), kind: invalidM, msg: "health_check.test must be"},
		{name: "empty test", payload: hc(`"test":[]`), kind: invalidM, msg: "health_check.test is required"},
		{name: "missing test", payload: hc(`"interval":"10s"`), kind: invalidM, msg: "health_check.test is required"},
		{name: "test as string", payload: hc(`"test":"curl -f x"`), kind: invalidM, msg: "must be an array of strings"},
		{name: "not an object", payload: flat(`"health_check":["CMD","true"]`), kind: invalidM, msg: "health_check must be an object"},
		{name: "unknown field", payload: hc(`"test":["NONE"],"Test":["CMD","x"]`), kind: invalidM, msg: `unknown field "Test"`},
		{name: "day unit", payload: hc(`"test":["CMD","true"],"interval":"1d"`), kind: invalidM, msg: "health_check.interval must be a Go duration"},
		{name: "week unit", payload: hc(`"test":["CMD","true"],"timeout":"2w"`), kind: invalidM, msg: "health_check.timeout must be a Go duration"},
		{name: "negative string", payload: hc(`"test":["CMD","true"],"start_period":"-1s"`), kind: invalidM, msg: "must not be negative"},
		{name: "negative ns", payload: hc(`"test":["CMD","true"],"interval":-5`), kind: invalidM, msg: "must not be negative"},
		{name: "fractional ns", payload: hc(`"test":["CMD","true"],"interval":1.5`), kind: invalidM, msg: "whole number of nanoseconds"},
		{name: "bool duration", payload: hc(`"test":["CMD","true"],"interval":true`), kind: invalidM, msg: "not a boolean"},
		{name: "below 1ms", payload: hc(`"test":["CMD","true"],"interval":"500us"`), kind: invalidM, msg: "at least 1ms"},
		{name: "negative retries", payload: hc(`"test":["CMD","true"],"retries":-1`), kind: invalidM, msg: "retries must be a whole number"},
		{name: "fractional retries", payload: hc(`"test":["CMD","true"],"retries":1.5`), kind: invalidM, msg: "retries must be a whole number"},
		{name: "string retries", payload: hc(`"test":["CMD","true"],"retries":"3"`), kind: invalidM, msg: "retries must be a number"},
	})
}

func TestBuild_Tmpfs(t *testing.T) {
	tmpfs := func(paths ...string) string {
		return flat(`"tmpfs":` + jsonArray(len(paths), func(i int) string { return fmt.Sprintf("%q", paths[i]) }))
	}
	runRules(t, []ruleRow{
		{name: "one path", payload: tmpfs("/data")},
		{name: "four paths", payload: tmpfs("/a", "/b", "/c", "/var/cache/app")},
		{name: "under /tmp is fine", payload: tmpfs("/tmp/cache")},
		{name: "prefix-alike of /proc is fine", payload: tmpfs("/procfs", "/run2", "/device")},
		{name: "five paths", payload: tmpfs("/a", "/b", "/c", "/d", "/e"), kind: invalidM, msg: "tmpfs: at most 4"},
		{name: "relative", payload: tmpfs("data"), kind: invalidM, msg: "absolute"},
		{name: "trailing slash", payload: tmpfs("/data/"), kind: invalidM, msg: "clean path"},
		{name: "dot-dot", payload: tmpfs("/a/../b"), kind: invalidM, msg: "clean path"},
		{name: "double slash", payload: tmpfs("//data"), kind: invalidM, msg: "clean path"},
		{name: "root", payload: tmpfs("/"), kind: invalidM, msg: "reserved"},
		{name: "/tmp", payload: tmpfs("/tmp"), kind: invalidM, msg: "reserved"},
		{name: "/run", payload: tmpfs("/run"), kind: invalidM, msg: "reserved"},
		{name: "/proc", payload: tmpfs("/proc"), kind: invalidM, msg: "/proc, /sys and /dev"},
		{name: "under /proc", payload: tmpfs("/proc/sys"), kind: invalidM, msg: "/proc, /sys and /dev"},
		{name: "under /sys", payload: tmpfs("/sys/fs/cgroup"), kind: invalidM, msg: "/proc, /sys and /dev"},
		{name: "under /dev", payload: tmpfs("/dev/shm"), kind: invalidM, msg: "/proc, /sys and /dev"},
		{name: "mount options", payload: tmpfs("/data:exec,size=10g"), kind: invalidM, msg: "':'"},
		{name: "duplicate", payload: tmpfs("/data", "/data"), kind: invalidM, msg: "listed twice"},
		{name: "not strings", payload: flat(`"tmpfs":[1]`), kind: invalidM, msg: "tmpfs[0] must be a string"},
	})
}

func TestBuild_User(t *testing.T) {
	user := func(u string) string { return flat(fmt.Sprintf(`"user":%q`, u)) }
	runRules(t, []ruleRow{
		{name: "uid", payload: user("1000")},
		{name: "uid:gid", payload: user("1000:1000")},
		{name: "root uid", payload: user("0")},
		{name: "max uid", payload: user("2147483647:2147483647")},
		{name: "name", payload: user("app")},
		{name: "name:group", payload: user("app:staff")},
		{name: "name with dollar", payload: user("_svc$")},
		{name: "mixed name and gid", payload: user("app:1000")},
		{name: "32-char name", payload: user(strings.Repeat("a", 32))},
		{name: "empty is absent", payload: user("")},
		{name: "uid beyond 2^31-1", payload: user("2147483648"), kind: invalidM, msg: "user"},
		{name: "trailing colon", payload: user("1000:"), kind: invalidM, msg: "uid[:gid]"},
		{name: "leading colon", payload: user(":1000"), kind: invalidM, msg: "uid[:gid]"},
		{name: "three parts", payload: user("1:2:3"), kind: invalidM, msg: "uid[:gid]"},
		{name: "uppercase name", payload: user("App"), kind: invalidM, msg: "uid[:gid]"},
		{name: "name starting with digit", payload: user("9app"), kind: invalidM, msg: "uid[:gid]"},
		{name: "name starting with dash", payload: user("-app"), kind: invalidM, msg: "uid[:gid]"},
		{name: "dollar inside", payload: user("a$b"), kind: invalidM, msg: "uid[:gid]"},
		{name: "33-char name", payload: user(strings.Repeat("a", 33)), kind: invalidM, msg: "uid[:gid]"},
		{name: "space", payload: user("a b"), kind: invalidM, msg: "uid[:gid]"},
		{name: "number", payload: flat(`"user":1000`), kind: invalidM, msg: "user must be a string"},
	})
}

func TestBuild_DependsOn(t *testing.T) {
	web := func(dep string) string { return `"web":{"image":"nginx","depends_on":` + dep + `}` }
	db := `"db":{"image":"nginx"}`
	dbHealthy := `"db":{"image":"nginx","health_check":{"test":["CMD-SHELL","pg_isready"]}}`
	dbNone := `"db":{"image":"nginx","health_check":{"test":["NONE"]}}`
	items := named("web", "db")
	runRules(t, []ruleRow{
		{name: "service_started", payload: stack(web(`{"db":{"condition":"service_started"}}`), db), items: items},
		{name: "service_healthy with active check", payload: stack(web(`{"db":{"condition":"service_healthy"}}`), dbHealthy), items: items},
		{name: "condition omitted", payload: stack(web(`{"db":{}}`), db), items: items},
		{name: "null entry", payload: stack(web(`{"db":null}`), db), items: items},
		{name: "depth 10", payload: chain(11), items: chainItems(11)},
		{name: "depth 11", payload: chain(12), items: chainItems(12), kind: invalidM, msg: "11 levels deep"},
		{name: "self", payload: stack(web(`{"web":{}}`), db), items: items, kind: invalidM, msg: "cannot depend on itself"},
		{name: "unknown target", payload: stack(web(`{"cache":{}}`), db), items: items, kind: invalidM, msg: `"cache" is not a service`},
		{name: "invalid target name", payload: stack(web(`{"Cache":{}}`), db), items: items, kind: invalidM, msg: "not a valid service name"},
		{name: "cycle", payload: stack(web(`{"db":{}}`), `"db":{"image":"nginx","depends_on":{"web":{}}}`), items: items, kind: invalidM, msg: "cycle"},
		{name: "healthy without health check", payload: stack(web(`{"db":{"condition":"service_healthy"}}`), db), items: items, kind: invalidM, msg: "needs an active health_check"},
		{name: "healthy with NONE check", payload: stack(web(`{"db":{"condition":"service_healthy"}}`), dbNone), items: items, kind: invalidM, msg: "needs an active health_check"},
		{name: "completed_successfully", payload: stack(web(`{"db":{"condition":"service_completed_successfully"}}`), db), items: items, kind: invalidM, msg: "condition must be"},
		{name: "short list form", payload: stack(web(`["db"]`), db), items: items, kind: invalidM, msg: "depends_on must be an object"},
		{name: "string entry", payload: stack(web(`{"db":"service_started"}`), db), items: items, kind: invalidM, msg: "must be an object"},
		{name: "unknown entry field", payload: stack(web(`{"db":{"restart":true}}`), db), items: items, kind: invalidM, msg: `unknown field "restart"`},
	})
}

// chain is a stack s0 → s1 → … → s(n-1): depth n-1.
func chain(n int) string {
	svcs := make([]string, n)
	for i := range svcs {
		dep := ""
		if i+1 < n {
			dep = fmt.Sprintf(`,"depends_on":{"s%d":{}}`, i+1)
		}
		svcs[i] = fmt.Sprintf(`"s%d":{"image":"nginx"%s}`, i, dep)
	}
	return stack(svcs...)
}

func chainItems(n int) []messages.LeaseItem {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	return named(names...)
}

func TestBuild_StopGraceInitExpose(t *testing.T) {
	runRules(t, []ruleRow{
		{name: "stop_grace_period 1s", payload: flat(`"stop_grace_period":"1s"`)},
		{name: "stop_grace_period 120s", payload: flat(`"stop_grace_period":"2m"`)},
		{name: "stop_grace_period ns", payload: flat(`"stop_grace_period":30000000000`)},
		{name: "stop_grace_period 0s", payload: flat(`"stop_grace_period":"0s"`), kind: invalidM, msg: "between 1s and 120s"},
		{name: "stop_grace_period 500ms", payload: flat(`"stop_grace_period":"500ms"`), kind: invalidM, msg: "between 1s and 120s"},
		{name: "stop_grace_period 121s", payload: flat(`"stop_grace_period":"2m1s"`), kind: invalidM, msg: "between 1s and 120s"},
		{name: "stop_grace_period 1d", payload: flat(`"stop_grace_period":"1d"`), kind: invalidM, msg: "stop_grace_period must be a Go duration"},
		{name: "stop_grace_period negative", payload: flat(`"stop_grace_period":"-10s"`), kind: invalidM, msg: "must not be negative"},
		{name: "init true", payload: flat(`"init":true`)},
		{name: "init false", payload: flat(`"init":false`)},
		{name: "init string", payload: flat(`"init":"yes"`), kind: invalidM, msg: "init must be a boolean"},
		{name: "init number", payload: flat(`"init":1`), kind: invalidM, msg: "init must be a boolean"},
		{name: "expose forms", payload: flat(`"expose":["80","8080/tcp","53/udp"]`)},
		{name: "expose 64", payload: flat(`"expose":` + jsonArray(64, func(i int) string { return fmt.Sprintf(`"%d"`, 2000+i) }))},
		{name: "expose 65", payload: flat(`"expose":` + jsonArray(65, func(i int) string { return fmt.Sprintf(`"%d"`, 2000+i) })), kind: invalidM, msg: "expose: at most 64"},
		{name: "expose duplicate after normalisation", payload: flat(`"expose":["80","80/tcp"]`), kind: invalidM, msg: "80/tcp is listed twice"},
		{name: "expose range", payload: flat(`"expose":["8000-8010"]`), kind: invalidM, msg: "no ranges"},
		{name: "expose name", payload: flat(`"expose":["http"]`), kind: invalidM, msg: `expose[0] "http"`},
		{name: "expose number", payload: flat(`"expose":[80]`), kind: invalidM, msg: "expose[0] must be a string"},
	})
}

func TestBuild_ComposeKeys(t *testing.T) {
	svc := func(names ...string) string {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf(`%q:{"image":"nginx"}`, n)
		}
		return stack(parts...)
	}
	q := func(pairs ...any) []messages.LeaseItem {
		var out []messages.LeaseItem
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, messages.LeaseItem{SKU: "s", ServiceName: pairs[i].(string), Quantity: pairs[i+1].(int)})
		}
		return out
	}
	runRules(t, []ruleRow{
		{name: "web x1 next to web-0", payload: svc("web", "web-0"), items: q("web", 1, "web-0", 1)},
		{name: "web x2 next to web-2", payload: svc("web", "web-2"), items: q("web", 2, "web-2", 1)},
		{name: "web x0 next to web-0", payload: svc("web", "web-0"), items: q("web", 0, "web-0", 1)},
		{name: "web x2 next to web-0", payload: svc("web", "web-0"), items: q("web", 2, "web-0", 1), kind: invalidM, msg: `Compose service "web-0"`},
		{name: "web x3 next to web-2", payload: svc("web", "web-2"), items: q("web", 3, "web-2", 1), kind: invalidM, msg: `Compose service "web-2"`},
		{name: "web-0 x2 next to web-0-1", payload: svc("web-0", "web-0-1"), items: q("web-0", 2, "web-0-1", 1), kind: invalidM, msg: `Compose service "web-0-1"`},
	})
}
