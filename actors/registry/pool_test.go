package registry

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// cpu is a Resources of only milli-cores, for readable pool arithmetic.
func cpu(cores float64) Resources { return Resources{CPUMilli: CPU(cores)} }

// assertInsufficient checks err is the pool's wire refusal and mentions want.
func assertInsufficient(t *testing.T, err error, want string) {
	t.Helper()
	var r *messages.Refusal
	if !errors.As(err, &r) || !errors.Is(err, messages.ErrInsufficientResources) {
		t.Fatalf("err = %v (%T), want a *messages.Refusal of ErrInsufficientResources", err, err)
	}
	if !strings.Contains(r.Msg, want) {
		t.Fatalf("refusal %q does not mention %q", r.Msg, want)
	}
}

func TestCPU_ConvertsCoresToRoundedMilliCores(t *testing.T) {
	for _, tc := range []struct {
		cores float64
		milli int64
	}{
		{0, 0}, {0.1, 100}, {0.2, 200}, {0.3, 300}, {1.0 / 3, 333}, {0.0005, 1}, {0.0004, 0}, {2.5, 2500}, {64, 64000},
	} {
		if got := CPU(tc.cores); got != tc.milli {
			t.Errorf("CPU(%v) = %d, want %d", tc.cores, got, tc.milli)
		}
	}
}

func TestPool_MilliCoreSums_AreExact(t *testing.T) {
	// In float64, 0.1 + 0.2 > 0.3: a float pool would refuse the second lease.
	a, b := 0.1, 0.2
	if a+b <= 0.3 {
		t.Fatalf("float arithmetic premise broken: %v", a+b)
	}
	p := NewPool(cpu(0.3), Resources{})
	if err := p.Check("a", "t", cpu(a)); err != nil {
		t.Fatalf("check a: %v", err)
	}
	p.Set("a", "t", cpu(a))
	if err := p.Check("b", "t", cpu(b)); err != nil {
		t.Fatalf("0.1 + 0.2 cores must fit a 0.3-core pool exactly: %v", err)
	}
	p.Set("b", "t", cpu(b))
	if got := p.Allocated(); got != cpu(0.3) {
		t.Fatalf("allocated = %+v, want exactly %+v", got, cpu(0.3))
	}
	s := p.Stats(0)
	if s.AllocatedCPUCores != 0.3 || s.AvailableCPUCores != 0 || s.TotalCPUCores != 0.3 {
		t.Fatalf("stats = %+v, want allocated exactly 0.3, available exactly 0", s)
	}
	// Full to the milli-core: one more milli-core is refused.
	assertInsufficient(t, p.Check("c", "t", Resources{CPUMilli: 1}), "pool")

	// Twenty 0.1-core instances fill a 2-core pool exactly (a float sum overshoots).
	var f float64
	for i := 0; i < 20; i++ {
		f += 0.1
	}
	if f <= 2.0 {
		t.Fatalf("float arithmetic premise broken: %v", f)
	}
	big := NewPool(cpu(2), Resources{})
	for i := 0; i < 20; i++ {
		id := string(rune('a' + i))
		if err := big.Check(id, "t", cpu(0.1)); err != nil {
			t.Fatalf("instance %d of 20: %v", i, err)
		}
		big.Set(id, "t", cpu(0.1))
	}
	if s := big.Stats(0); s.AllocatedCPUCores != 2 || s.AvailableCPUCores != 0 {
		t.Fatalf("stats after 20 × 0.1 = %+v, want exactly 2 allocated", s)
	}
	big.Release("a")
	if s := big.Stats(0); s.AllocatedCPUCores != 1.9 || s.AvailableCPUCores != 0.1 {
		t.Fatalf("stats after one release = %+v, want exactly 1.9 allocated and 0.1 available", s)
	}
}

// multiSpec is a lease of two services: web ×3 (0.3 cores, 256 MB, 100 MB disk) and a
// diskless db ×1 (0.2 cores, 512 MB, 64 MB pinned scratch).
func multiSpec() *lease.Spec {
	return &lease.Spec{Lease: "l", Tenant: "t", Services: []lease.ServiceSpec{
		{Name: "db", Quantity: 1, Profile: lease.Profile{CPUCores: 0.2, MemoryMB: 512, ScratchMB: 64}},
		{Name: "web", Quantity: 3, Profile: lease.Profile{CPUCores: 0.3, MemoryMB: 256, DiskMB: 100}},
	}}
}

func TestNeed_SumsEveryInstanceWithPinnedScratch(t *testing.T) {
	want := Resources{CPUMilli: 1100, MemoryMB: 1280, DiskMB: 364}
	if got := Need(multiSpec()); got != want {
		t.Fatalf("Need = %+v, want %+v", got, want)
	}
	zero := &lease.Spec{Services: []lease.ServiceSpec{{Name: "idle", Quantity: 0, Profile: lease.Profile{CPUCores: 4, MemoryMB: 1}}}}
	if got := Need(zero); got != (Resources{}) {
		t.Fatalf("Need of a quantity-0 service = %+v, want nothing", got)
	}
}

func TestPool_MultiInstanceLease_AllOrNothing(t *testing.T) {
	need := Need(multiSpec()) // 1.1 cores, 1280 MB, 364 MB
	for _, tc := range []struct {
		name  string
		total Resources
	}{
		{"cpu one milli-core short", Resources{CPUMilli: 1099, MemoryMB: 1280, DiskMB: 364}},
		{"memory one MB short", Resources{CPUMilli: 1100, MemoryMB: 1279, DiskMB: 364}},
		{"disk one MB short", Resources{CPUMilli: 1100, MemoryMB: 1280, DiskMB: 363}},
		{"zero total dimension is not unlimited", Resources{CPUMilli: 1100, MemoryMB: 1280}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPool(tc.total, Resources{})
			assertInsufficient(t, p.Check("l", "t", need), "pool")
			if p.Allocated() != (Resources{}) {
				t.Fatalf("a refused check reserved %+v", p.Allocated())
			}
			if s := p.Stats(0); s.AllocatedCPUCores != 0 || s.AllocatedMemoryMB != 0 || s.AllocatedDiskMB != 0 {
				t.Fatalf("stats after refusal = %+v, want nothing allocated", s)
			}
		})
	}
	p := NewPool(Resources{CPUMilli: 1100, MemoryMB: 1280, DiskMB: 364}, Resources{})
	if err := p.Check("l", "t", need); err != nil {
		t.Fatalf("an exact fit must be admitted: %v", err)
	}
	p.Set("l", "t", need)
	if p.Allocated() != need {
		t.Fatalf("allocated = %+v, want the whole lease %+v", p.Allocated(), need)
	}
}

func TestPool_TenantQuota_ZeroDimensionIsUnlimited(t *testing.T) {
	total := Resources{CPUMilli: 10000, MemoryMB: 1 << 20, DiskMB: 1 << 20}
	p := NewPool(total, Resources{CPUMilli: 500}) // memory and disk quota 0 = unlimited
	huge := Resources{CPUMilli: 300, MemoryMB: 900000, DiskMB: 900000}
	if err := p.Check("l1", "t1", huge); err != nil {
		t.Fatalf("memory/disk quota 0 must be unlimited: %v", err)
	}
	p.Set("l1", "t1", huge)
	second := Resources{CPUMilli: 300, MemoryMB: 1, DiskMB: 1}
	assertInsufficient(t, p.Check("l2", "t1", second), "quota")
	if err := p.Check("l2", "t2", second); err != nil {
		t.Fatalf("another tenant has its own quota: %v", err)
	}
	if err := p.Check("l2", "t1", Resources{CPUMilli: 200}); err != nil {
		t.Fatalf("0.3 + 0.2 fits a 0.5-core quota exactly: %v", err)
	}
	p.Release("l1")
	if err := p.Check("l2", "t1", second); err != nil {
		t.Fatalf("released reservation still counts against the tenant: %v", err)
	}

	unlimited := NewPool(total, Resources{})
	unlimited.Set("a", "t", Resources{CPUMilli: 9000, MemoryMB: 5, DiskMB: 5})
	if err := unlimited.Check("b", "t", Resources{CPUMilli: 1000}); err != nil {
		t.Fatalf("a zero quota must not limit anything: %v", err)
	}
}

func TestPool_Readmission_CountsCurrentReservationAsFreed(t *testing.T) {
	p := NewPool(cpu(1), cpu(0.8))
	p.Set("a", "t", cpu(0.6))
	if err := p.Check("a", "t", cpu(0.8)); err != nil {
		t.Fatalf("re-admitting a at 0.8 (its 0.6 freed) must fit a 1.0 pool and 0.8 quota: %v", err)
	}
	assertInsufficient(t, p.Check("b", "t2", cpu(0.8)), "pool") // for another lease the 0.6 is held
	assertInsufficient(t, p.Check("b", "t", cpu(0.3)), "quota") // and counts against the tenant
	p.Set("a", "t", cpu(0.8))
	if got := p.Allocated(); got != cpu(0.8) {
		t.Fatalf("allocated after swap = %+v, want 0.8 (not 0.6 + 0.8)", got)
	}

	// Re-admission under another tenant frees the old tenant's share, and charges the
	// new tenant the whole need.
	q := NewPool(cpu(10), cpu(0.8))
	q.Set("a", "t1", cpu(0.6))
	q.Set("c", "t2", cpu(0.5))
	assertInsufficient(t, q.Check("a", "t2", cpu(0.4)), "quota")
	if err := q.Check("a", "t2", cpu(0.3)); err != nil {
		t.Fatalf("0.5 + 0.3 fits t2's 0.8 quota: %v", err)
	}
	q.Set("a", "t2", cpu(0.3))
	if err := q.Check("x", "t1", cpu(0.8)); err != nil {
		t.Fatalf("t1's share must be freed when a moved to t2: %v", err)
	}
	assertInsufficient(t, q.Check("x", "t2", cpu(0.1)), "quota")
	if got := q.Allocated(); got != cpu(0.8) {
		t.Fatalf("allocated = %+v, want 0.8", got)
	}
}

func TestPool_ReleaseOfNothingIsNoOp_AndStatsRenderEveryField(t *testing.T) {
	p := NewPool(Resources{CPUMilli: 4000, MemoryMB: 8192, DiskMB: 10000}, Resources{})
	p.Release("never")
	p.Set("a", "t", Resources{CPUMilli: 1250, MemoryMB: 1000, DiskMB: 2500})
	p.Set("b", "t", Resources{CPUMilli: 750, MemoryMB: 24, DiskMB: 500})
	p.Release("b")
	p.Release("b")
	p.Set("b", "t", Resources{CPUMilli: 500, MemoryMB: 1024, DiskMB: 0})
	got := p.Stats(7)
	want := messages.Stats{
		TotalCPUCores: 4, TotalMemoryMB: 8192, TotalDiskMB: 10000,
		AllocatedCPUCores: 1.75, AllocatedMemoryMB: 2024, AllocatedDiskMB: 2500,
		AvailableCPUCores: 2.25, AvailableMemoryMB: 6168, AvailableDiskMB: 7500,
		ActiveContainers: 7,
	}
	if got != want {
		t.Fatalf("stats = %+v\nwant    %+v", got, want)
	}
	p.Release("a")
	p.Release("b")
	if p.Allocated() != (Resources{}) || len(p.byTenant) != 0 || len(p.byLease) != 0 {
		t.Fatalf("empty pool keeps %+v, tenants %v, leases %v", p.Allocated(), p.byTenant, p.byLease)
	}
}
