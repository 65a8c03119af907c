package refresh

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A read sets the stale and shared gauges and counts ok; a failed read counts
// error and keeps the last values.
func TestMetrics_ReadSetsTheGaugesAFailedOneKeepsThem(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.read(Inventory{Stale: map[string][]string{"a": {"c1"}}, Shared: []string{"a", "b"}}, nil)
	m.read(Inventory{}, errors.New("docker down"))
	if s, sh := testutil.ToFloat64(m.stale), testutil.ToFloat64(m.shared); s != 1 || sh != 2 {
		t.Fatalf("stale %v shared %v, want 1 and 2 (kept through the failed read)", s, sh)
	}
	if ok, bad := testutil.ToFloat64(m.inventories.WithLabelValues("ok")), testutil.ToFloat64(m.inventories.WithLabelValues("error")); ok != 1 || bad != 1 {
		t.Fatalf("inventories ok %v error %v, want 1 and 1", ok, bad)
	}
}
