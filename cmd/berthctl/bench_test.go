package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages/callback"
)

func TestBenchPercentile_NearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[len(hundred)-1-i] = time.Duration(i+1) * time.Millisecond // unsorted on purpose
	}
	three := []time.Duration{3 * time.Second, 1 * time.Second, 2 * time.Second}
	for _, tc := range []struct {
		sample []time.Duration
		p      float64
		want   time.Duration
	}{
		{hundred, 0.50, 50 * time.Millisecond},
		{hundred, 0.95, 95 * time.Millisecond},
		{hundred, 0.99, 99 * time.Millisecond},
		{hundred, 1, 100 * time.Millisecond},
		{three, 0.50, 2 * time.Second}, // rank ceil(1.5) = 2
		{three, 0.95, 3 * time.Second},
		{three, 0, 1 * time.Second}, // rank 0 is the smallest, never out of range
		{[]time.Duration{7}, 0.99, 7},
		{nil, 0.5, 0},
	} {
		if got := percentile(tc.sample, tc.p); got != tc.want {
			t.Errorf("percentile(n=%d, %.2f) = %s, want %s", len(tc.sample), tc.p, got, tc.want)
		}
	}
	if three[0] != 3*time.Second {
		t.Fatal("percentile sorted the caller's slice")
	}
}

// benchFixture is a passing run of 3 leases with known latencies.
func benchFixture() benchReport {
	rep := benchReport{Leases: 3, Image: "127.0.0.1:5000/berth/workload:test", SKU: "docker-micro",
		VerifySeconds: 1, VerifySource: "-config /etc/berth/berthd.yaml"}
	rep.Berthd = benchBerthd{Accepted: 3, Succeeded: 3,
		Accept: summarize([]time.Duration{8 * time.Millisecond, 12 * time.Millisecond, 40 * time.Millisecond}),
		Ready:  summarize([]time.Duration{1500 * time.Millisecond, 1600 * time.Millisecond, 1800 * time.Millisecond}),
		WallMs: 1810}
	rep.Raw = benchRaw{RunID: "run", Launched: 3,
		Ready:  summarize([]time.Duration{1200 * time.Millisecond, 1250 * time.Millisecond, 1300 * time.Millisecond}),
		WallMs: 1310, Phases: map[string]latencyStats{
			"network": summarize([]time.Duration{60 * time.Millisecond}), "create": summarize([]time.Duration{90 * time.Millisecond}),
			"start": summarize([]time.Duration{110 * time.Millisecond}), "inspect": summarize([]time.Duration{4 * time.Millisecond})}}
	rep.Callbacks = benchCallbacks{Received: 6, Verified: 6}
	rep.Cleanup = benchCleanup{Deprovisioned: 3, DeprovisionedCallbacks: 3}
	for _, l := range []string{"a", "b", "c"} {
		rep.PerLease = append(rep.PerLease, benchLease{Lease: l, AcceptMs: 10, ReadyMs: 1600, Outcome: "success"})
	}
	rep.computeRatios()
	rep.judge()
	return rep
}

func TestBenchReport_TextIsTheTableRatiosTalliesAndVerdict(t *testing.T) {
	var out bytes.Buffer
	if err := benchFixture().printText(&out); err != nil {
		t.Fatal(err)
	}
	want := `bench: 3 leases of 127.0.0.1:5000/berth/workload:test, sku docker-micro, startup_verify_duration 1s from -config /etc/berth/berthd.yaml

LATENCY        P50    P95    P99    MAX    WALL   OK   MEASURED
berthd accept  12ms   40ms   40ms   40ms   -      3/3  POST /provision → 202
berthd ready   1.60s  1.80s  1.80s  1.80s  1.81s  3/3  POST /provision → signed success callback
raw docker     1.25s  1.30s  1.30s  1.30s  1.31s  3/3  network + create + start + verify wait + inspect

berthd/raw: p50 1.28×, wall 1.38× (beyond the verify wait: p50 2.40×, wall 2.61×)
raw docker p50 by phase: network 60ms, create 90ms, start 110ms, inspect 4ms
callbacks: 6 received, 6 signatures verified, 0 bad
cleanup: 3/3 deprovisioned, 3 deprovisioned callbacks; left: 0 in /provisions, 0 in Docker, 0 of the raw run
verdict: ok
`
	wantText(t, out.String(), want)
}

func TestBenchReport_JSONHasEveryListAndTheNumbers(t *testing.T) {
	var out bytes.Buffer
	if err := benchFixture().printJSON(&out); err != nil {
		t.Fatal(err)
	}
	for _, empty := range []string{`"problems": []`, `"left_in_provisions": []`, `"left_in_docker": []`, `"raw_left": []`} {
		if !strings.Contains(out.String(), empty) {
			t.Errorf("JSON lacks %s:\n%s", empty, out.String())
		}
	}
	var rep benchReport
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != "ok" || rep.Berthd.Ready.P50Ms != 1600 || rep.Berthd.Accept.P99Ms != 40 ||
		rep.Raw.Ready.P95Ms != 1300 || rep.Ratio.P50 != 1.28 || rep.Ratio.Wall != 1.38 || len(rep.PerLease) != 3 {
		t.Fatalf("decoded %+v", rep)
	}
}

// Each kind of trouble fails the verdict with a problem that names it.
func TestBenchReport_AnyTroubleFailsTheVerdict(t *testing.T) {
	for name, tc := range map[string]struct {
		spoil func(*benchReport)
		want  string
	}{
		"a failed provision": {func(r *benchReport) {
			r.Berthd.Succeeded, r.Berthd.Failed = 2, 1
			r.PerLease[1] = benchLease{Lease: "b", Outcome: "failed", Error: "container exited during startup"}
		}, "1 of 3 provisions did not succeed"},
		"a bad signature":      {func(r *benchReport) { r.Callbacks.BadSignatures = 1 }, "1 callback requests had a bad signature"},
		"a lease still listed": {func(r *benchReport) { r.Cleanup.LeftInProvisions = []string{"b (deprovisioning)"} }, "still listed by GET /provisions: b (deprovisioning)"},
		"a network left":       {func(r *benchReport) { r.Cleanup.LeftInDocker = []string{"network fred-b"} }, "Docker objects of the leases remain: network fred-b"},
		"a raw object left":    {func(r *benchReport) { r.Cleanup.RawLeft = []string{"volume v"} }, "raw-baseline objects remain: volume v"},
		"no raw baseline":      {func(r *benchReport) { r.Raw = benchRaw{Error: "ping docker: refused"} }, "raw baseline: ping docker: refused"},
	} {
		t.Run(name, func(t *testing.T) {
			rep := benchFixture()
			rep.Problems, rep.Verdict = nil, ""
			tc.spoil(&rep)
			rep.judge()
			if rep.Verdict != "fail" || !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Fatalf("verdict %q, problems %q; want fail with %q", rep.Verdict, rep.Problems, tc.want)
			}
			var out bytes.Buffer
			if err := rep.printText(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(out.String(), "verdict: fail\n") || !strings.Contains(out.String(), "problem: ") {
				t.Fatalf("text:\n%s", out.String())
			}
		})
	}
}

func TestBenchReport_RatiosNeedBothSides(t *testing.T) {
	rep := benchFixture()
	rep.Raw = benchRaw{Error: "no engine"}
	rep.computeRatios()
	if rep.Ratio != (benchRatio{}) {
		t.Fatalf("ratios without a raw side: %+v", rep.Ratio)
	}
	var out bytes.Buffer
	_ = rep.printText(&out)
	if !strings.Contains(out.String(), "berthd/raw: p50 n/a, wall n/a") {
		t.Fatalf("text:\n%s", out.String())
	}
}

// The receiver accepts only what berthd's secret signed, answers a bad
// signature 401 (so berthd retries it, as with Fred), and counts a redelivery
// of the same delivery ID once.
func TestBenchCallbackSink_VerifiesSignaturesAndDeduplicates(t *testing.T) {
	sink, err := startCallbackSink([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	send := func(key, delivery string) int {
		t.Helper()
		body := []byte(`{"lease_uuid":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","status":"success","backend_storage_id":""}`)
		req, err := http.NewRequest(http.MethodPost, sink.url+"/callbacks/provision?operation_id=op", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Berth-Delivery-Id", delivery)
		if err := callback.SignRequest([]byte(key), req, body, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send("not-berthds-secret-0123456789abcdef", "d1"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature answered %d", code)
	}
	if code := send(secret, "d1"); code/100 != 2 {
		t.Fatalf("good signature answered %d", code)
	}
	if code := send(secret, "d1"); code/100 != 2 {
		t.Fatalf("redelivery answered %d", code)
	}
	received, verified, bad, garbled := sink.counts()
	if received != 1 || verified != 2 || bad != 1 || garbled != 0 {
		t.Fatalf("received %d, verified %d, bad %d, garbled %d; want 1, 2, 1, 0", received, verified, bad, garbled)
	}
	cb, ok := sink.first("6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10", "success")
	if !ok || !callbackAt(cb.URI, "operation_id", "op") {
		t.Fatalf("recorded %+v, %t", cb, ok)
	}
}

func TestBench_RefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-n", "0", "-image", "x"},
		{"bench", "-n", "2"}, // no -image and no BERTH_TEST_IMAGE (TestMain drops it)
		{"bench", "-image", "x", "-o", "yaml"},
	} {
		var out bytes.Buffer
		if err := run(append([]string{"-secret-file", secretFile(t)}, args...), nil, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// The raw side copies the daemon's verify wait, Docker engine, bind IP,
// hardening and the SKU's profile (through sku_mapping): from -config when
// given, else the embedded defaults `make run` uses; -verify and -docker-host win.
func TestBenchSettings_FromTheDaemonsConfigUnlessFlagged(t *testing.T) {
	cfg := writeDaemonConfig(t,
		"data_dir: "+t.TempDir(),
		"callback_secret: "+secret,
		"startup_verify_duration: 2s",
		"docker_host: unix:///run/other-docker.sock",
		"host_bind_ip: 127.0.0.2",
		"container_pids_limit: 100",
		"sku_mapping: {chain-sku-1: docker-medium}",
	)
	d, err := loadDaemonConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := resolveBenchSettings(d, benchOptions{sku: "chain-sku-1"})
	if err != nil {
		t.Fatal(err)
	}
	if set.verify != 2*time.Second || set.verifySource != "-config "+cfg || set.configSource != "-config "+cfg || set.dockerHost != "unix:///run/other-docker.sock" ||
		set.hostBindIP != "127.0.0.2" || set.pidsLimit != 100 || !set.readonly || set.profile.MemoryMB != 1024 || set.profile.CPUCores != 1 {
		t.Fatalf("from -config: %+v", set)
	}
	set, err = resolveBenchSettings(d, benchOptions{sku: "docker-micro", verify: 300 * time.Millisecond, dockerHost: "tcp://127.0.0.1:2375"})
	if err != nil {
		t.Fatal(err)
	}
	if set.verify != 300*time.Millisecond || set.verifySource != "-verify" || set.dockerHost != "tcp://127.0.0.1:2375" || set.profile.MemoryMB != 256 {
		t.Fatalf("flags: %+v", set)
	}
	set, err = resolveBenchSettings(nil, benchOptions{sku: "docker-small"})
	if err != nil {
		t.Fatal(err)
	}
	if set.verify != 5*time.Second || !strings.Contains(set.verifySource, "embedded defaults") || set.profile.MemoryMB != 512 {
		t.Fatalf("embedded defaults: %+v", set)
	}
}

// A batch the pool cannot hold is refused before any lease is made, naming
// what it needs and what is available.
func TestBench_ABatchTooBigForThePoolIsRefusedUpFront(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/stats", `{"available_cpu_cores":8,"available_memory_mb":16384,"available_disk_mb":102400}`)
	_, err := f.run("bench", "-n", "20", "-sku", "docker-small", "-image", "127.0.0.1:5000/berth/workload:test")
	if err == nil || !strings.Contains(err.Error(), "20 × docker-small (0.5 cores, 512 MB memory, 1024 MB disk each") ||
		!strings.Contains(err.Error(), "does not fit the pool's 8 cores") {
		t.Fatalf("err %v", err)
	}
	for _, uri := range f.requests() {
		if uri != "/stats" {
			t.Fatalf("requests %v: only /stats may be asked", f.requests())
		}
	}
}
