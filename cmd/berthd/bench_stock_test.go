package main

// Provision latency of the stock nginx image with writable-path detection and
// seeding (container_readonly_rootfs: true) against the same image on a
// writable rootfs (false, nothing to detect), in one run: two daemons, leases
// provisioned one at a time, alternating. Each sample is POST /provision to
// the success callback less startup_verify_duration (the fixed wait both
// share); the read-only side's first lease detects uncached and is reported
// on its own, the p50s are of the rest. Aim: ratio_p50 ≤ 1.15.
//
// Under berth's hardening nginx itself cannot run on a writable rootfs: as
// root it lacks CAP_CHOWN and CAP_SETUID (every capability is dropped), as
// www-data it cannot create its temp directories in the root-owned
// /var/lib/nginx — the seeded writable paths are what make it run. So the
// writable side runs the same image (same pull, pin and container) with its
// program replaced by `sleep infinity`, which writes nothing.
//
//	go test -run '^$' -bench BenchmarkProvision_StockNginxReadonlyVsWritable -benchtime 1x ./cmd/berthd/

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// stockBenchVerify is the benchmark daemons' startup_verify_duration.
const stockBenchVerify = time.Second

// stockBenchRounds is BERTH_STOCK_BENCH_ROUNDS leases per side (default 8).
func stockBenchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("BERTH_STOCK_BENCH_ROUNDS")); err == nil && n > 1 {
		return n
	}
	return 8
}

// stockBenchProvision provisions one lease of manifest, waits for its success
// callback, closes it, and returns the time beyond the verify wait.
func stockBenchProvision(b *testing.B, d *daemonProc, cb *callbackReceiver, manifest any) time.Duration {
	b.Helper()
	lease := uuid.NewString()
	sent := time.Now()
	if r := d.provision(lease, cb.callbackURL(), manifest); r.Status != 202 {
		b.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)[0]
	if got.Body.Status != messages.CallbackSuccess {
		b.Fatalf("provision callback: %+v", got.Body)
	}
	d.deprovisionUntilGone(lease)
	return got.At.Sub(sent) - stockBenchVerify
}

func BenchmarkProvision_StockNginxReadonlyVsWritable(b *testing.B) {
	dockerClient(b)
	image := stockImage(b, "BERTH_TEST_NGINX_IMAGE")
	manifest := stockManifest(image, "80/tcp", nginxAsWwwData)
	sleeping := stockManifest(image, "80/tcp", map[string]any{"user": "www-data", "command": []string{"sleep", "infinity"}})
	verify := "startup_verify_duration: " + stockBenchVerify.String()
	cb := newCallbackReceiver(b)
	ro := newDaemonDir(b, verify, "container_readonly_rootfs: true").startInProcess()
	rw := newDaemonDir(b, verify, "container_readonly_rootfs: false").startInProcess()
	rounds := stockBenchRounds()
	b.ResetTimer()
	for range b.N {
		first := stockBenchProvision(b, ro, cb, manifest)
		var seeded, plain []time.Duration
		for range rounds {
			plain = append(plain, stockBenchProvision(b, rw, cb, sleeping))
			seeded = append(seeded, stockBenchProvision(b, ro, cb, manifest))
		}
		b.ReportMetric(0, "ns/op") // one op is many provisions; the metrics are the result
		b.ReportMetric(benchMs(first), "readonly_first_ms")
		b.ReportMetric(benchMs(benchPercentile(seeded, 0.5)), "readonly_p50_ms")
		b.ReportMetric(benchMs(benchPercentile(plain, 0.5)), "writable_p50_ms")
		b.ReportMetric(float64(benchPercentile(seeded, 0.5))/float64(benchPercentile(plain, 0.5)), "ratio_p50")
		b.Logf("beyond the %s verify wait: read-only (detection + seeding) first %.0f ms, then %s; writable rootfs %s",
			stockBenchVerify, benchMs(first), benchP50p95(seeded), benchP50p95(plain))
	}
}
