package main

// berthctl bench: N concurrent provisions of a flat single-container lease
// against a live berthd, timed from POST to the signed success callback, next
// to the same N launches done with raw Docker in the same run; then every lease
// is closed and the run proves it left nothing behind.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio/dockertest/rawbaseline"
	"github.com/berth-dev/berth/messages"
)

// errBenchFailed makes berthctl exit 1 after printing a report with a problem.
var errBenchFailed = errors.New("bench: the run had problems (see the report)")

// benchOptions are the command line of one bench run.
type benchOptions struct {
	n          int
	image      string
	sku        string
	port       string
	tenant     string
	timeout    time.Duration // bounds the wait for the batch's callbacks, and again its cleanup
	verify     time.Duration // startup_verify_duration for the raw side; 0 = the daemon's
	dockerHost string
	output     string
}

// benchSettings is what the raw side must copy from the daemon to launch the
// same containers berthd does.
type benchSettings struct {
	verify       time.Duration
	verifySource string
	configSource string // where the daemon's settings were read
	dockerHost   string
	hostBindIP   string
	profile      config.SKUProfile // zero when the SKU is unknown to the config read
	readonly     bool
	pidsLimit    int64
	tmpfsSizeMB  int64
}

func (c *client) bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o benchOptions
	fs.IntVar(&o.n, "n", 20, "leases to provision at once (and raw launches)")
	fs.StringVar(&o.image, "image", os.Getenv("BERTH_TEST_IMAGE"), "image of the flat lease (default $BERTH_TEST_IMAGE)")
	// The smallest starter profile: 20 of them fit the embedded defaults' pool
	// (8 cores), 20 docker-small (0.5 cores each) do not.
	fs.StringVar(&o.sku, "sku", "docker-micro", "SKU of each lease's one item")
	fs.StringVar(&o.port, "port", "8080/tcp", "container port to publish (empty for none)")
	fs.StringVar(&o.tenant, "tenant", "tenant-bench", "tenant of the leases")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the batch's callbacks, and again for its cleanup")
	fs.DurationVar(&o.verify, "verify", 0, "startup_verify_duration the raw launches wait (default: the daemon's, from -config or the embedded defaults)")
	fs.StringVar(&o.dockerHost, "docker-host", "", "Docker engine of the raw baseline (default: the daemon's docker_host)")
	output := outputFlag(fs)
	rest, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	o.output = *output
	switch {
	case len(rest) > 0:
		return errors.New("usage: berthctl bench [-n N] [-image REF] [-sku SKU] [-timeout D] [-verify D] [-o table|json]")
	case o.n < 1 || o.n > 1024:
		return fmt.Errorf("bench: -n must be 1–1024, not %d", o.n)
	case o.image == "":
		return errors.New("bench needs -image (or BERTH_TEST_IMAGE), e.g. -image 127.0.0.1:5000/berth/workload:test")
	case o.timeout <= 0:
		return errors.New("bench: -timeout must be positive")
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	set, err := resolveBenchSettings(c.daemon, o)
	if err != nil {
		return err
	}
	if err := c.checkBenchCapacity(o, set); err != nil {
		return err
	}

	// Ctrl-C cuts the waiting short, never the cleanup: leases and raw objects
	// left running would outlive the run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := c.runBench(ctx, o, set)
	if err != nil {
		return err
	}
	if o.output == outputJSON {
		err = rep.printJSON(c.out)
	} else {
		err = rep.printText(c.out)
	}
	if err != nil {
		return err
	}
	if rep.Verdict != "ok" {
		return errBenchFailed
	}
	return nil
}

// resolveBenchSettings reads what the raw side copies from berthd's config:
// the -config file's, else the embedded defaults `make run` starts berthd on
// (with this environment's BERTH_* overrides, as berthd would apply them).
func resolveBenchSettings(daemon *daemonConfig, o benchOptions) (benchSettings, error) {
	var cfg *config.Config
	var source string
	if daemon != nil {
		cfg, source = daemon.cfg, "-config "+daemon.cfg.File
	} else {
		loaded, err := config.Load("", os.Environ())
		if err != nil {
			return benchSettings{}, fmt.Errorf("bench: berthd's embedded defaults: %w", err)
		}
		cfg, source = loaded, "berthd's embedded defaults (make run; -config FILE for another)"
	}
	set := benchSettings{
		verify: cfg.StartupVerifyDuration, verifySource: source, configSource: source,
		dockerHost: cmp.Or(o.dockerHost, cfg.DockerHost), hostBindIP: cfg.HostBindIP,
		readonly: cfg.ContainerReadonlyRootfs, pidsLimit: cfg.ContainerPidsLimit, tmpfsSizeMB: cfg.ContainerTmpfsSizeMB,
	}
	if o.verify > 0 {
		set.verify, set.verifySource = o.verify, "-verify"
	}
	if set.verify <= 0 {
		set.verify = config.DefaultStartupVerifyDuration
	}
	name := o.sku
	if mapped, ok := cfg.SKUMapping[o.sku]; ok {
		name = mapped
	}
	set.profile = cfg.SKUProfiles[name] // an unknown SKU: berthd refuses it, and the report says so
	return set, nil
}

// checkBenchCapacity refuses a batch the daemon's pool cannot hold (GET
// /stats) before any lease is made: berthd would answer the excess 503
// insufficient_resources, and the run would measure a refusal, not a launch.
// An SKU the config read does not know is left for berthd to judge.
func (c *client) checkBenchCapacity(o benchOptions, set benchSettings) error {
	var st messages.Stats
	if err := c.getAPIJSON("/stats", &st); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	p, n := set.profile, float64(o.n)
	if p == (config.SKUProfile{}) {
		return nil
	}
	if n*p.CPUCores > st.AvailableCPUCores+1e-9 || int64(o.n)*p.MemoryMB > st.AvailableMemoryMB || int64(o.n)*p.DiskMB > st.AvailableDiskMB {
		return fmt.Errorf("bench: %d × %s (%g cores, %d MB memory, %d MB disk each, per %s) does not fit the pool's %g cores, %d MB memory, %d MB disk available (GET /stats): lower -n or choose a smaller -sku",
			o.n, o.sku, p.CPUCores, p.MemoryMB, p.DiskMB, set.configSource, st.AvailableCPUCores, st.AvailableMemoryMB, st.AvailableDiskMB)
	}
	return nil
}

// benchLeaseRun is one lease of the batch as it goes.
type benchLeaseRun struct {
	lease, operation string
	sent, accepted   time.Time
	refused          string // the answer when it was not a 202
	completion       benchCallback
	completed        bool
}

// runBench is the whole run: berthd's batch, its cleanup, the raw batch.
func (c *client) runBench(ctx context.Context, o benchOptions, set benchSettings) (benchReport, error) {
	rep := benchReport{Leases: o.n, Image: o.image, SKU: o.sku, VerifySeconds: set.verify.Seconds(), VerifySource: set.verifySource}
	sink, err := startCallbackSink(c.secret)
	if err != nil {
		return rep, err
	}
	defer sink.close()
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

	runs := make([]*benchLeaseRun, o.n)
	for i := range runs {
		runs[i] = &benchLeaseRun{lease: uuid.NewString(), operation: uuid.NewString()}
	}

	progress("provisioning %d leases of %s at once (callbacks to %s)", o.n, o.image, sink.url)
	begin := c.provisionBatch(runs, sink.url, o, flatManifest(o.image, o.port))
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	sink.waitUntil(wctx, func() bool {
		done := true
		for _, r := range runs {
			if r.refused == "" && !r.completed {
				r.completion, r.completed = sink.first(r.lease, messages.CallbackSuccess, messages.CallbackFailed)
				done = done && r.completed
			}
		}
		return done
	})
	cancel()
	missing := benchLease{Outcome: "timeout", Error: "no completion callback within " + o.timeout.String()}
	if ctx.Err() != nil {
		missing = benchLease{Outcome: "interrupted", Error: "before its completion callback"}
	}
	rep.collectBerthd(runs, begin, missing)

	progress("closing the %d leases", o.n)
	c.cleanupBerthd(ctx, &rep, runs, sink, set, o.timeout)
	rep.Callbacks.Received, rep.Callbacks.Verified, rep.Callbacks.BadSignatures, rep.Callbacks.Garbled = sink.counts()

	if ctx.Err() == nil {
		progress("raw Docker baseline: %d launches at once, each waiting %s", o.n, set.verify)
		rep.collectRaw(rawbaseline.Run(ctx, rawbaseline.Options{
			Host: set.dockerHost, Image: o.image, Count: o.n, VerifyDuration: set.verify,
			Port: o.port, HostBindIP: set.hostBindIP,
			CPUCores: set.profile.CPUCores, MemoryMB: set.profile.MemoryMB,
			PidsLimit: set.pidsLimit, ReadonlyRootfs: set.readonly, TmpfsSizeMB: set.tmpfsSizeMB,
		}))
	} else {
		rep.Raw.Error = "interrupted before it ran"
	}
	rep.computeRatios()
	rep.judge()
	return rep, nil
}

// provisionBatch sends every provision at once and returns when the batch began.
func (c *client) provisionBatch(runs []*benchLeaseRun, sinkURL string, o benchOptions, payload []byte) time.Time {
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range runs {
		body, _ := json.Marshal(messages.ProvisionRequest{
			LeaseUUID: r.lease, Tenant: o.tenant, ProviderUUID: "provider-bench",
			Items: []messages.LeaseItem{{SKU: o.sku, Quantity: 1}},
			// As providerd: the operation's identity in operation_id, which
			// berthd turns into lifecycle_id for the deprovisioned callback.
			CallbackURL: sinkURL + "/callbacks/provision?operation_id=" + r.operation,
			Payload:     base64.StdEncoding.EncodeToString(payload),
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r.sent = time.Now()
			status, data, err := c.call(http.MethodPost, "/provision", body)
			switch {
			case err != nil:
				r.refused = err.Error()
			case !strings.HasPrefix(status, "202"):
				r.refused = status + " " + strings.TrimSpace(string(data))
			default:
				r.accepted = time.Now()
			}
		}()
	}
	begin := time.Now()
	close(gate)
	wg.Wait()
	return begin
}

// collectBerthd turns the batch into the berthd side of the report.
// A lease without a completion callback gets missing's outcome and error.
func (rep *benchReport) collectBerthd(runs []*benchLeaseRun, begin time.Time, missing benchLease) {
	var accept, ready []time.Duration
	var last time.Time
	for _, r := range runs {
		l := benchLease{Lease: r.lease}
		switch {
		case r.refused != "":
			l.Outcome, l.Error = "refused", r.refused
		case !r.completed:
			l.Outcome, l.Error = missing.Outcome, missing.Error
		case r.completion.Status != messages.CallbackSuccess:
			l.Outcome, l.Error = r.completion.Status, r.completion.Error
		case !callbackAt(r.completion.URI, "operation_id", r.operation):
			l.Outcome, l.Error = "misrouted", "success callback arrived at "+r.completion.URI
		default:
			l.Outcome = "success"
		}
		if !r.accepted.IsZero() {
			rep.Berthd.Accepted++
			accept = append(accept, r.accepted.Sub(r.sent))
			l.AcceptMs = ms(r.accepted.Sub(r.sent))
		}
		if l.Outcome == "success" {
			rep.Berthd.Succeeded++
			ready = append(ready, r.completion.At.Sub(r.sent))
			l.ReadyMs = ms(r.completion.At.Sub(r.sent))
			if r.completion.At.After(last) {
				last = r.completion.At
			}
		} else {
			rep.Berthd.Failed++
		}
		rep.PerLease = append(rep.PerLease, l)
	}
	rep.Berthd.Accept, rep.Berthd.Ready = summarize(accept), summarize(ready)
	if !last.IsZero() {
		rep.Berthd.WallMs = ms(last.Sub(begin))
	}
}

// callbackAt reports whether uri carries key=value in its query.
func callbackAt(uri, key, value string) bool {
	u, err := url.Parse(uri)
	return err == nil && u.Query().Get(key) == value
}

// cleanupBerthd closes every lease (a 503 retried, as providerd does, until the
// close finishes), waits for the deprovisioned callbacks, then checks that
// neither berthd nor Docker still holds any of them.
func (c *client) cleanupBerthd(ctx context.Context, rep *benchReport, runs []*benchLeaseRun, sink *callbackSink, set benchSettings, timeout time.Duration) {
	// Detached from Ctrl-C: the leases exist whether or not the run was cut short.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	closed := make([]bool, len(runs))
	var wg sync.WaitGroup
	limit := make(chan struct{}, 20) // berthd holds each close up to 25 s: bound the open requests
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			closed[i] = c.deprovisionUntilClosed(cctx, r.lease)
		}()
	}
	wg.Wait()
	leases := make([]string, len(runs))
	for i, r := range runs {
		leases[i] = r.lease
		if closed[i] {
			rep.Cleanup.Deprovisioned++
		} else {
			rep.Problems = append(rep.Problems, fmt.Sprintf("lease %s: deprovision did not answer 200 within %s", r.lease, timeout))
		}
	}

	// Every admitted lease reports its close with a lifecycle callback.
	sink.waitUntil(cctx, func() bool {
		for _, r := range runs {
			if _, ok := sink.first(r.lease, messages.CallbackDeprovisioned); !ok && r.refused == "" {
				return false
			}
		}
		return true
	})
	for _, r := range runs {
		cb, ok := sink.first(r.lease, messages.CallbackDeprovisioned)
		switch {
		case ok && !callbackAt(cb.URI, "lifecycle_id", r.operation):
			rep.Problems = append(rep.Problems, fmt.Sprintf("lease %s: deprovisioned callback arrived at %s, not its lifecycle URL", r.lease, cb.URI))
			rep.Cleanup.DeprovisionedCallbacks++
		case ok:
			rep.Cleanup.DeprovisionedCallbacks++
		case r.refused == "":
			rep.Problems = append(rep.Problems, fmt.Sprintf("lease %s: no deprovisioned callback within %s", r.lease, timeout))
		}
	}

	left, err := c.listedProvisions(leases)
	if err != nil {
		rep.Problems = append(rep.Problems, "GET /provisions: "+err.Error())
	}
	rep.Cleanup.LeftInProvisions = left

	// The lease network goes a little after the close (the reclaimer removes
	// it): give Docker until the deadline to be empty of them.
	for {
		left, err := rawbaseline.LeaseLeftovers(cctx, set.dockerHost, leases)
		if err == nil && len(left) == 0 {
			rep.Cleanup.LeftInDocker = nil
			return
		}
		rep.Cleanup.LeftInDocker = left
		if cctx.Err() != nil {
			if err != nil {
				rep.Problems = append(rep.Problems, "Docker check of the leases: "+err.Error())
			}
			return
		}
		select {
		case <-cctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// deprovisionUntilClosed sends POST /deprovision until berthd answers 200,
// retrying a 503 (lifecycle_pending: the close is journaled, teardown goes on)
// and a lost connection; any other answer is final.
func (c *client) deprovisionUntilClosed(ctx context.Context, lease string) bool {
	body, _ := json.Marshal(messages.DeprovisionRequest{LeaseUUID: lease})
	for {
		status, _, err := c.call(http.MethodPost, "/deprovision", body)
		switch {
		case err == nil && strings.HasPrefix(status, "200"):
			return true
		case err == nil && !strings.HasPrefix(status, "503"):
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// listedProvisions returns "lease (status)" for each of leases GET /provisions
// still lists, asking 100 at a time (the contract's limit per request).
func (c *client) listedProvisions(leases []string) ([]string, error) {
	var left []string
	for chunk := range slices.Chunk(leases, 100) {
		q := url.Values{}
		for _, l := range chunk {
			q.Add("lease_uuid", l)
		}
		var page struct {
			Provisions []messages.ProvisionInfo `json:"provisions"`
		}
		if err := c.getAPIJSON("/provisions?"+q.Encode(), &page); err != nil {
			return left, err
		}
		for _, p := range page.Provisions {
			left = append(left, fmt.Sprintf("%s (%s)", p.LeaseUUID, p.Status))
		}
	}
	return left, nil
}

// collectRaw turns the raw baseline into its side of the report.
func (rep *benchReport) collectRaw(res rawbaseline.Result, err error) {
	rep.Raw.RunID, rep.Raw.ImagePulled = res.RunID, res.ImagePulled
	rep.Cleanup.RawLeft = res.Leftovers
	if err != nil {
		rep.Raw.Error = err.Error()
		return
	}
	var ready []time.Duration
	phases := map[string][]time.Duration{}
	for _, l := range res.Launches {
		if l.Err != nil {
			rep.Raw.Failed++
			rep.Problems = append(rep.Problems, "raw launch "+l.Name+": "+l.Err.Error())
			continue
		}
		rep.Raw.Launched++
		ready = append(ready, l.Total)
		for phase, d := range map[string]time.Duration{"network": l.Network, "create": l.Create, "start": l.Start, "inspect": l.Inspect} {
			phases[phase] = append(phases[phase], d)
		}
	}
	rep.Raw.Ready = summarize(ready)
	if len(ready) > 0 {
		rep.Raw.Phases = map[string]latencyStats{}
		for phase, sample := range phases {
			rep.Raw.Phases[phase] = summarize(sample)
		}
	}
	if rep.Raw.Launched > 0 {
		rep.Raw.WallMs = ms(res.Wall)
	}
}
