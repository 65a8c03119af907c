package manifest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

func TestBuild_FlatManifest_WrappedAsApp(t *testing.T) {
	items := loneItem()
	lease, err := Build([]byte(flat(`"ports":{"80":{}}`)), items, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Flat {
		t.Error("Flat = false for a flat payload")
	}
	if len(lease.Services) != 1 || lease.Services["app"] == nil {
		t.Fatalf("services = %v, want only app", lease.Services)
	}
	if got := lease.Items[0].ServiceName; got != "app" {
		t.Errorf("item service name %q, want app", got)
	}
	if items[0].ServiceName != "" {
		t.Error("Build modified the caller's items")
	}
	if _, ok := lease.Services["app"].Ports["80/tcp"]; !ok {
		t.Errorf("bare port not normalised: %v", lease.Services["app"].Ports)
	}
}

func TestBuild_StackManifest_ItemsKeepRequestOrder(t *testing.T) {
	items := []messages.LeaseItem{
		{SKU: "b", Quantity: 2, ServiceName: "web", CustomDomain: "x.example"},
		{SKU: "a", Quantity: 1, ServiceName: "db"},
	}
	lease, err := Build([]byte(stack(`"db":{"image":"nginx"}`, `"web":{"image":"ghcr.io/o/web:1"}`)), items, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Flat {
		t.Error("Flat = true for a stack payload")
	}
	if !reflect.DeepEqual(lease.Items, items) {
		t.Errorf("items = %+v, want %+v", lease.Items, items)
	}
	if lease.Services["web"].Image != "ghcr.io/o/web:1" || lease.Services["db"].Image != "nginx" {
		t.Errorf("images mixed up: web=%q db=%q", lease.Services["web"].Image, lease.Services["db"].Image)
	}
}

func TestNormalizeItems_LoneUnnamedBecomesApp(t *testing.T) {
	in := []messages.LeaseItem{{SKU: "s", Quantity: 3}}
	out, err := NormalizeItems(in)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].ServiceName != "app" || out[0].Quantity != 3 || out[0].SKU != "s" {
		t.Errorf("got %+v", out[0])
	}
	if in[0].ServiceName != "" {
		t.Error("input modified")
	}
}

func TestNormalizeItems_NamedUnchanged(t *testing.T) {
	in := named("web", "db")
	out, err := NormalizeItems(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("got %+v, want %+v", out, in)
	}
}

func TestComposeKey(t *testing.T) {
	for _, c := range []struct {
		svc       string
		qty, idx  int
		want      string
		dockerKey bool
	}{
		{"web", 1, 0, "web", true},
		{"web", 2, 0, "web-0", true},
		{"web", 2, 1, "web-1", true},
		{"app", 1024, 1023, "app-1023", true},
	} {
		if got := ComposeKey(c.svc, c.qty, c.idx); got != c.want {
			t.Errorf("ComposeKey(%q,%d,%d) = %q, want %q", c.svc, c.qty, c.idx, got, c.want)
		}
	}
}

func TestBuild_AllFieldsParsed(t *testing.T) {
	payload := stack(`"web":{
		"image":"127.0.0.1:5000/berth/workload:test",
		"ports":{"8080/tcp":{"host_port":0,"ingress":true},"53/udp":{}},
		"env":{"MODE":"serve","EMPTY":""},
		"command":["/workload"],
		"args":["serve","--port","8080"],
		"labels":{"app.tier":"web"},
		"health_check":{"test":["CMD","/workload","probe"],"interval":"2s","timeout":1000000000,"start_period":"1m30s","retries":5},
		"tmpfs":["/cache"],
		"user":"1000:1000",
		"depends_on":{"db":{"condition":"service_healthy"}},
		"stop_grace_period":"15s",
		"init":true,
		"expose":["9090","9091/udp"]
	}`, `"db":{"image":"nginx","health_check":{"test":["CMD-SHELL","true"]}}`)
	lease, err := Build([]byte(payload), named("web", "db"), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := &Service{
		Image:   "127.0.0.1:5000/berth/workload:test",
		Ports:   map[string]Port{"8080/tcp": {Ingress: true}, "53/udp": {}},
		Env:     map[string]string{"MODE": "serve", "EMPTY": ""},
		Command: []string{"/workload"},
		Args:    []string{"serve", "--port", "8080"},
		Labels:  map[string]string{"app.tier": "web"},
		HealthCheck: &HealthCheck{
			Test:        []string{"CMD", "/workload", "probe"},
			Interval:    Duration(2 * time.Second),
			Timeout:     Duration(time.Second),
			StartPeriod: Duration(90 * time.Second),
			Retries:     5,
		},
		Tmpfs:           []string{"/cache"},
		User:            "1000:1000",
		DependsOn:       map[string]Dependency{"db": {Condition: ConditionHealthy}},
		StopGracePeriod: Duration(15 * time.Second),
		Init:            &yes,
		Expose:          []string{"9090/tcp", "9091/udp"},
	}
	if got := lease.Services["web"]; !reflect.DeepEqual(got, want) {
		t.Errorf("web =\n%+v\nwant\n%+v", got, want)
	}
	if k, ok := lease.Services["web"].IngressPort(); !ok || k != "8080/tcp" {
		t.Errorf("IngressPort = %q %v", k, ok)
	}
	if _, ok := lease.Services["db"].IngressPort(); ok {
		t.Error("db has no ingress port")
	}
	if !lease.Services["db"].HealthCheck.Active() {
		t.Error("CMD-SHELL check not active")
	}
}

func TestHealthCheck_Active(t *testing.T) {
	var nilCheck *HealthCheck
	for _, c := range []struct {
		h    *HealthCheck
		want bool
	}{
		{nilCheck, false},
		{&HealthCheck{}, false},
		{&HealthCheck{Test: []string{"NONE"}}, false},
		{&HealthCheck{Test: []string{"CMD", "x"}}, true},
		{&HealthCheck{Test: []string{"CMD-SHELL", "x"}}, true},
	} {
		if got := c.h.Active(); got != c.want {
			t.Errorf("%+v.Active() = %v, want %v", c.h, got, c.want)
		}
	}
}

// The JSON form of a lease's services is itself a manifest Build accepts, giving
// back the same services: what a journal stores can be re-validated on recovery.
func TestBuild_MarshalledServices_RoundTrip(t *testing.T) {
	payload := stack(`"web":{"image":"nginx","ports":{"80":{"ingress":true}},"env":{"A":"1"},"health_check":{"test":["CMD","true"],"interval":1500000000,"retries":2},"depends_on":{"db":null},"stop_grace_period":"1m","expose":["81"],"init":false,"user":"app"}`,
		`"db":{"image":"ghcr.io/o/db@sha256:`+strings.Repeat("0", 64)+`","tmpfs":["/data"],"labels":{"x":"y"},"command":["db"],"args":["--fast"]}`)
	first, err := Build([]byte(payload), named("web", "db"), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{"services": first.Services})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(raw, named("web", "db"), testOpts)
	if err != nil {
		t.Fatalf("re-build of %s: %v", raw, err)
	}
	if !reflect.DeepEqual(first.Services, second.Services) {
		t.Errorf("round trip changed services:\n%s", raw)
	}
}

func TestBuild_AllowlistNormalised(t *testing.T) {
	for _, c := range []struct {
		allow []string
		image string
		ok    bool
	}{
		{[]string{"index.docker.io"}, "nginx", true},
		{[]string{"docker.io"}, "index.docker.io/library/nginx", true},
		{[]string{"Docker.IO"}, "nginx", true},
		{[]string{" ghcr.io "}, "GHCR.io/o/a", true},
		{[]string{"ghcr.io"}, "nginx", false},
		{[]string{"docker.io"}, "localhost/x", false},
		{nil, "nginx", false},
		{[]string{"127.0.0.1:5000"}, "127.0.0.1:5000/x", true},
		{[]string{"127.0.0.1"}, "127.0.0.1:5000/x", false},
	} {
		_, err := Build([]byte(`{"image":"`+c.image+`"}`), loneItem(), Options{AllowedRegistries: c.allow})
		if c.ok && err != nil {
			t.Errorf("allow %v image %q: %v", c.allow, c.image, err)
		}
		if !c.ok {
			assertRefusal(t, err, messages.ErrImageNotAllowed, "not allowed")
		}
	}
}

// Huge tenant input must not come back in a message: at most a short excerpt.
func TestBuild_RefusalMessages_BoundedExcerpts(t *testing.T) {
	huge := strings.Repeat("Z", 100<<10)
	ctrl := strings.Repeat("\u0001\u00e9\U0001F600", 2000)
	hugeItems := named(strings.Repeat("q", 5000))
	for _, c := range []struct {
		name    string
		payload string
		items   []messages.LeaseItem
	}{
		{"unknown field", `{"image":"nginx","` + huge + `":1}`, nil},
		{"unknown field with control runes", `{"image":"nginx","` + ctrl + `":1}`, nil},
		{"image", `{"image":"` + huge + `"}`, nil},
		{"env name", `{"image":"nginx","env":{"` + huge + `":"x"}}`, nil},
		{"duplicate key", `{"image":"nginx","env":{"` + huge + `":"x","` + huge + `":"y"}}`, nil},
		{"port key", `{"image":"nginx","ports":{"` + huge + `":{}}}`, nil},
		{"tmpfs", `{"image":"nginx","tmpfs":["` + huge + `"]}`, nil},
		{"user", `{"image":"nginx","user":"` + ctrl + `"}`, nil},
		{"service name", `{"services":{"` + huge + `":{"image":"nginx"}}}`, nil},
		{"registry", `{"image":"` + strings.Repeat("a", 240) + `.example/x"}`, nil},
		{"item name", `{"image":"nginx"}`, hugeItems},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := c.items
			if items == nil {
				items = loneItem()
			}
			_, err := Build([]byte(c.payload), items, testOpts)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			assertSafeMessage(t, msg)
			if len(msg) > 200 {
				t.Errorf("message is %d bytes: %q", len(msg), msg)
			}
			for _, run := range []string{strings.Repeat("Z", 40), strings.Repeat("a", 40), strings.Repeat("q", 40)} {
				if strings.Contains(msg, run) {
					t.Errorf("message echoes more than a short excerpt: %q", msg)
				}
			}
		})
	}
}
