package manifest

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// FuzzBuild: Build never panics; every error is a *messages.Refusal of one of the
// three kinds with a safe message; every accepted lease satisfies the invariants
// Build promises and survives a marshal → Build round trip unchanged.
func FuzzBuild(f *testing.F) {
	lone := `[{"sku":"s","quantity":1}]`
	two := `[{"sku":"s","quantity":2,"service_name":"web"},{"sku":"s","quantity":1,"service_name":"db"}]`
	for _, s := range []struct{ payload, items string }{
		{`{"image":"nginx"}`, lone},
		{`{"image":"nginx","ports":{"80":{"ingress":true},"53/udp":{}},"env":{"A":"b"},"user":"1000:1000","tmpfs":["/data"],"expose":["81"]}`, lone},
		{`{"image":"ghcr.io/o/a:v1","health_check":{"test":["CMD","true"],"interval":"1s","retries":3},"stop_grace_period":"10s","init":true}`, lone},
		{`{"services":{"web":{"image":"nginx","depends_on":{"db":{"condition":"service_healthy"}}},"db":{"image":"127.0.0.1:5000/db","health_check":{"test":["CMD-SHELL","true"]}}}}`, two},
		{`{"services":{"web":{"image":"nginx"},"web-0":{"image":"nginx"}}}`, `[{"sku":"s","quantity":2,"service_name":"web"},{"sku":"s","quantity":1,"service_name":"web-0"}]`},
		{`{"services":{"web":{"image":"nginx","depends_on":{"db":{}}},"db":{"image":"nginx","depends_on":{"web":{}}}}}`, two},
		{`{"image":"quay.io/x","labels":{"fred.x":"y"}}`, lone},
		{`{"image":"nginx","image":"x"}`, lone},
		{`{"image":"nginx","depends_on":{"x":{}}}`, lone},
		{`[]`, `[]`},
		{`{"image":"nginx"} x`, `[{"quantity":-1}]`},
	} {
		f.Add([]byte(s.payload), []byte(s.items))
	}
	f.Fuzz(func(t *testing.T, payload, itemsJSON []byte) {
		var items []messages.LeaseItem
		if json.Unmarshal(itemsJSON, &items) != nil {
			items = []messages.LeaseItem{{SKU: "s", Quantity: 1}}
		}
		lease, err := Build(payload, items, testOpts)
		if err != nil {
			var r *messages.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("error %T is not a *messages.Refusal: %v", err, err)
			}
			if r.Kind != messages.ErrInvalidManifest && r.Kind != messages.ErrImageNotAllowed && r.Kind != messages.ErrBadRequest {
				t.Fatalf("refusal kind %v", r.Kind)
			}
			assertSafeMessage(t, r.Msg)
			return
		}
		names := make([]string, len(lease.Items))
		keys := map[string]bool{}
		total := 0
		for i, it := range lease.Items {
			names[i] = it.ServiceName
			total += it.Quantity
			for j := 0; j < it.Quantity; j++ {
				k := ComposeKey(it.ServiceName, it.Quantity, j)
				if keys[k] {
					t.Fatalf("compose key %q twice", k)
				}
				keys[k] = true
			}
		}
		if total > MaxQuantity {
			t.Fatalf("total quantity %d accepted", total)
		}
		slices.Sort(names)
		if got := slices.Sorted(maps.Keys(lease.Services)); !slices.Equal(got, names) {
			t.Fatalf("services %v, items %v", got, names)
		}
		for name, s := range lease.Services {
			if host, err := Registry(s.Image); err != nil || !slices.Contains(testOpts.AllowedRegistries, host) {
				t.Fatalf("service %s image %q accepted (registry %q, %v)", name, s.Image, host, err)
			}
		}
		raw, err := json.Marshal(map[string]any{"services": lease.Services})
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Build(raw, lease.Items, testOpts)
		if err != nil {
			t.Fatalf("accepted lease does not round-trip: %v\n%s", err, raw)
		}
		if !reflect.DeepEqual(again.Services, lease.Services) {
			t.Fatalf("round trip changed services:\n%s", raw)
		}
	})
}
