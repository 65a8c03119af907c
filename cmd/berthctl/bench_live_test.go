package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio/dockertest/rawbaseline"
)

// benchTestImage is BERTH_TEST_IMAGE as the run was started with (TestMain
// drops it before any test runs).
var benchTestImage = func() string {
	if img := os.Getenv("BERTH_TEST_IMAGE"); img != "" {
		return img
	}
	return "127.0.0.1:5000/berth/workload:test"
}()

// startBenchBerthd runs the real daemon from its own binary on a fresh data
// dir, with a 1 s startup verification so a bench of a few leases stays short,
// and returns its config file.
func startBenchBerthd(t *testing.T) string {
	t.Helper()
	bin := buildBerthd(t)
	root := t.TempDir()
	cfg := writeDaemonConfig(t,
		"data_dir: "+filepath.Join(root, "data"),
		"listen_addr: "+freeAddr(t),
		"debug_listen_addr: "+freeAddr(t),
		"callback_secret: "+secret,
		"log_level: warn",
		// No warm pool: the bench compares leases making their own networks
		// with raw Docker (cmd/berthd's tests cover the pool).
		"network_pool_size: 0",
		"startup_verify_duration: 1s",
		"volume_data_path: "+filepath.Join(root, "volumes"),
		"volume_filesystem: dir",
	)
	_, log := runBerthd(t, bin, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berthd log:\n%s", log.String())
		}
	})
	d, err := loadDaemonConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, "http://"+dialAddr(d.cfg.ListenAddr), log)
	return cfg
}

// `berthctl bench -n 3` against a real berthd and the real engine: three
// successes with every callback's signature verified, both sides timed and
// compared, every lease closed and nothing of it or of the raw run left — the
// table for people, and the same facts in -o json, checked against Docker
// directly.
func TestBench_LiveBerthdThreeLeasesAgainstRawDocker(t *testing.T) {
	requireDocker(t)
	cfg := startBenchBerthd(t)
	bench := func(format string) string {
		t.Helper()
		var out bytes.Buffer
		err := run([]string{"-config", cfg, "bench", "-n", "3", "-image", benchTestImage, "-sku", "docker-micro",
			"-timeout", "3m", "-o", format}, nil, &out)
		if err != nil {
			t.Fatalf("bench -o %s: %v\n%s", format, err, out.String())
		}
		return out.String()
	}

	text := bench(outputTable)
	t.Logf("bench -n 3:\n%s", text)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^bench: 3 leases of ` + regexp.QuoteMeta(benchTestImage) + `, sku docker-micro, startup_verify_duration 1s from -config `),
		regexp.MustCompile(`(?m)^berthd accept +\d+ms +\S+ +\S+ +\S+ +- +3/3 `),
		regexp.MustCompile(`(?m)^berthd ready +\d+\.\d\ds +\S+ +\S+ +\S+ +\d+\.\d\ds +3/3 `),
		regexp.MustCompile(`(?m)^raw docker +\d+\.\d\ds +\S+ +\S+ +\S+ +\d+\.\d\ds +3/3 `),
		regexp.MustCompile(`(?m)^berthd/raw: p50 \d+\.\d\d×, wall \d+\.\d\d× \(beyond the verify wait: p50 \d+\.\d\d×, wall \d+\.\d\d×\)$`),
		regexp.MustCompile(`(?m)^callbacks: 6 received, ([6-9]|\d\d+) signatures verified, 0 bad$`),
		regexp.MustCompile(`(?m)^cleanup: 3/3 deprovisioned, 3 deprovisioned callbacks; left: 0 in /provisions, 0 in Docker, 0 of the raw run$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("report lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "problem:") || !strings.HasSuffix(text, "\nverdict: ok\n") {
		t.Errorf("report lists problems:\n%s", text)
	}

	var rep benchReport
	dec := json.NewDecoder(strings.NewReader(bench(outputJSON)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != "ok" || len(rep.Problems) != 0 || rep.Berthd.Succeeded != 3 || rep.Berthd.Accepted != 3 ||
		rep.Raw.Launched != 3 || rep.Callbacks.BadSignatures != 0 || rep.Callbacks.Received != 6 {
		t.Fatalf("report %+v", rep)
	}
	// Each side waited the 1 s verification, so neither is faster than that.
	if rep.Berthd.Ready.P50Ms < 1000 || rep.Raw.Ready.P50Ms < 1000 || rep.Ratio.P50 <= 0 || rep.Ratio.Wall <= 0 {
		t.Fatalf("latencies %+v / %+v, ratio %+v", rep.Berthd.Ready, rep.Raw.Ready, rep.Ratio)
	}
	leases := make([]string, 0, len(rep.PerLease))
	for _, l := range rep.PerLease {
		if l.Outcome != "success" || l.ReadyMs < 1000 || l.AcceptMs <= 0 {
			t.Errorf("lease %+v", l)
		}
		leases = append(leases, l.Lease)
	}

	// Docker itself, asked without the bench's code: nothing of the raw run's
	// label, nothing of the leases.
	docker, err := newDockerAPI("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, path := range []string{"/containers/json?all=1&filters=", "/networks?filters="} {
		var objects []json.RawMessage
		filter := url.QueryEscape(`{"label":["` + rawbaseline.RunLabel + `=` + rep.Raw.RunID + `"]}`)
		if err := docker.get(ctx, path+filter, &objects); err != nil {
			t.Fatal(err)
		}
		if len(objects) != 0 {
			t.Errorf("raw run %s left %s: %s", rep.Raw.RunID, path, objects)
		}
	}
	for _, l := range leases {
		var objects []json.RawMessage
		if err := docker.get(ctx, "/containers/json?all=1&filters="+url.QueryEscape(`{"label":["fred.lease_uuid=`+l+`"]}`), &objects); err != nil {
			t.Fatal(err)
		}
		if len(objects) != 0 {
			t.Errorf("lease %s left containers: %s", l, objects)
		}
		if err := docker.get(ctx, "/networks/fred-"+l, nil); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("lease %s network: %v (want 404)", l, err)
		}
	}
}
