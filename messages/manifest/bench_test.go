package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// Worst-case shapes near the 1 MiB limit: Build must stay linear.
func BenchmarkBuild(b *testing.B) {
	manyServices := make([]string, MaxItems)
	manyItems := make([]messages.LeaseItem, MaxItems)
	for i := range manyServices {
		dep := ""
		if i > 0 {
			dep = fmt.Sprintf(`,"depends_on":{"s%d":{}}`, (i-1)/2) // a binary tree, depth 9
		}
		manyServices[i] = fmt.Sprintf(`"s%d":{"image":"nginx","env":{"A":"1"}%s}`, i, dep)
		manyItems[i] = messages.LeaseItem{SKU: "s", ServiceName: fmt.Sprintf("s%d", i)}
	}
	for _, c := range []struct {
		name    string
		payload string
		items   []messages.LeaseItem
	}{
		{"small flat", flat(`"ports":{"80/tcp":{"ingress":true}},"env":{"A":"b"},"health_check":{"test":["CMD","true"]}`), loneItem()},
		{"1MiB env value", flat(`"env":{"A":"` + strings.Repeat("x", MaxPayloadBytes-64) + `"}`), loneItem()},
		{"100k tiny values", flat(`"args":[` + strings.Repeat(`0,`, maxNodes-10) + `0]`), loneItem()},
		{"1024 services", stack(manyServices...), manyItems},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.payload)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Build([]byte(c.payload), c.items, testOpts)
			}
		})
	}
}
