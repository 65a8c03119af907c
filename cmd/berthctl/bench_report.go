package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchReport is the result of one `berthctl bench` run, as printed and, with
// -o json, as emitted. Latencies are milliseconds.
type benchReport struct {
	Leases        int     `json:"leases"`
	Image         string  `json:"image"`
	SKU           string  `json:"sku"`
	VerifySeconds float64 `json:"startup_verify_seconds"`
	VerifySource  string  `json:"startup_verify_source"` // where startup_verify_duration came from

	Berthd    benchBerthd    `json:"berthd"`
	Raw       benchRaw       `json:"raw_docker"`
	Ratio     benchRatio     `json:"ratio"`
	Callbacks benchCallbacks `json:"callbacks"`
	Cleanup   benchCleanup   `json:"cleanup"`
	PerLease  []benchLease   `json:"per_lease"`

	Problems []string `json:"problems"` // every reason the run failed; empty when it passed
	Verdict  string   `json:"verdict"`  // "ok" or "fail"
}

type benchBerthd struct {
	Accepted  int          `json:"accepted"` // answered 202
	Succeeded int          `json:"succeeded"`
	Failed    int          `json:"failed"` // refused, failed callback, or none within -timeout
	Accept    latencyStats `json:"accept"` // POST /provision → 202
	Ready     latencyStats `json:"ready"`  // POST /provision → success callback
	WallMs    float64      `json:"wall_ms"`
}

type benchRaw struct {
	RunID       string       `json:"run_id,omitempty"`
	Launched    int          `json:"launched"` // running after the verify wait
	Failed      int          `json:"failed"`
	ImagePulled bool         `json:"image_pulled"`
	Ready       latencyStats `json:"ready"` // network create → inspect after the verify wait
	// Phases split Ready's work: network, create, start, inspect (the verify
	// wait is the rest), to tell where a slow raw side spends its time.
	Phases map[string]latencyStats `json:"phases,omitempty"`
	WallMs float64                 `json:"wall_ms"`
	Error  string                  `json:"error,omitempty"` // the baseline could not run at all
}

// benchRatio is berthd over raw Docker; the beyond-verify ratios take the same
// verify wait off both sides, leaving only the work each does.
type benchRatio struct {
	P50              float64 `json:"p50"`
	Wall             float64 `json:"wall"`
	P50BeyondVerify  float64 `json:"p50_beyond_verify"`
	WallBeyondVerify float64 `json:"wall_beyond_verify"`
}

type benchCallbacks struct {
	Received      int `json:"received"`       // distinct deliveries accepted
	Verified      int `json:"verified"`       // requests whose signature verified
	BadSignatures int `json:"bad_signatures"` // requests refused for their signature
	Garbled       int `json:"garbled"`        // verified, but not a callback body
}

type benchCleanup struct {
	Deprovisioned          int      `json:"deprovisioned"`           // answered 200
	DeprovisionedCallbacks int      `json:"deprovisioned_callbacks"` // "deprovisioned" callbacks received
	LeftInProvisions       []string `json:"left_in_provisions"`      // still listed by GET /provisions
	LeftInDocker           []string `json:"left_in_docker"`          // containers/networks of the leases
	RawLeft                []string `json:"raw_left"`                // raw-baseline objects not removed
}

type benchLease struct {
	Lease    string  `json:"lease_uuid"`
	AcceptMs float64 `json:"accept_ms,omitempty"`
	ReadyMs  float64 `json:"ready_ms,omitempty"`
	Outcome  string  `json:"outcome"` // success, failed, refused, misrouted, timeout, interrupted
	Error    string  `json:"error,omitempty"`
}

// latencyStats summarises a sample by nearest rank.
type latencyStats struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// percentile is the nearest-rank percentile (the smallest value with at least
// p of the sample at or below it); 0 for an empty sample.
func percentile(sample []time.Duration, p float64) time.Duration {
	if len(sample) == 0 {
		return 0
	}
	sorted := slices.Clone(sample)
	slices.Sort(sorted)
	rank := int(math.Ceil(p * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func summarize(sample []time.Duration) latencyStats {
	return latencyStats{Count: len(sample), P50Ms: ms(percentile(sample, 0.50)), P95Ms: ms(percentile(sample, 0.95)),
		P99Ms: ms(percentile(sample, 0.99)), MaxMs: ms(percentile(sample, 1))}
}

// ms is d in milliseconds to 0.1 ms: finer than any Docker call, coarse enough to read.
func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// ratio is a/b to two decimals, 0 when either side is missing.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return math.Round(a/b*100) / 100
}

// computeRatios fills r.Ratio from the two sides' medians and walls.
func (r *benchReport) computeRatios() {
	verify := r.VerifySeconds * 1000
	r.Ratio = benchRatio{
		P50:              ratio(r.Berthd.Ready.P50Ms, r.Raw.Ready.P50Ms),
		Wall:             ratio(r.Berthd.WallMs, r.Raw.WallMs),
		P50BeyondVerify:  ratio(r.Berthd.Ready.P50Ms-verify, r.Raw.Ready.P50Ms-verify),
		WallBeyondVerify: ratio(r.Berthd.WallMs-verify, r.Raw.WallMs-verify),
	}
}

// judge sets the verdict from the counts and lists every problem found.
func (r *benchReport) judge() {
	add := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	if r.Berthd.Failed > 0 || r.Berthd.Succeeded != r.Leases {
		add("%d of %d provisions did not succeed", r.Leases-r.Berthd.Succeeded, r.Leases)
	}
	if r.Callbacks.BadSignatures > 0 {
		add("%d callback requests had a bad signature", r.Callbacks.BadSignatures)
	}
	if r.Callbacks.Garbled > 0 {
		add("%d signed callback requests were not callbacks", r.Callbacks.Garbled)
	}
	if r.Raw.Error != "" {
		add("raw baseline: %s", r.Raw.Error)
	} else if r.Raw.Failed > 0 {
		add("%d of %d raw launches failed", r.Raw.Failed, r.Leases)
	}
	if n := len(r.Cleanup.LeftInProvisions); n > 0 {
		add("%d leases still listed by GET /provisions: %s", n, strings.Join(r.Cleanup.LeftInProvisions, ", "))
	}
	if n := len(r.Cleanup.LeftInDocker); n > 0 {
		add("%d Docker objects of the leases remain: %s", n, strings.Join(r.Cleanup.LeftInDocker, ", "))
	}
	if n := len(r.Cleanup.RawLeft); n > 0 {
		add("%d raw-baseline objects remain: %s", n, strings.Join(r.Cleanup.RawLeft, ", "))
	}
	r.Verdict = "ok"
	if len(r.Problems) > 0 {
		r.Verdict = "fail"
	}
}

// printJSON emits the report with every list present (never null), so a
// script can index it without checks.
func (r benchReport) printJSON(out io.Writer) error {
	for _, l := range []*[]string{&r.Problems, &r.Cleanup.LeftInProvisions, &r.Cleanup.LeftInDocker, &r.Cleanup.RawLeft} {
		if *l == nil {
			*l = []string{}
		}
	}
	if r.PerLease == nil {
		r.PerLease = []benchLease{}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// printText prints the summary table, the ratios, the callback and cleanup
// tallies, each problem, and the verdict.
func (r benchReport) printText(out io.Writer) error {
	fmt.Fprintf(out, "bench: %d leases of %s, sku %s, startup_verify_duration %s from %s\n\n", r.Leases, r.Image, r.SKU,
		time.Duration(r.VerifySeconds*float64(time.Second)), r.VerifySource)
	t := newTable(out, "LATENCY", "P50", "P95", "P99", "MAX", "WALL", "OK", "MEASURED")
	b, raw := r.Berthd, r.Raw
	t.row("berthd accept", msText(b.Accept.P50Ms), msText(b.Accept.P95Ms), msText(b.Accept.P99Ms), msText(b.Accept.MaxMs), "",
		fmt.Sprintf("%d/%d", b.Accepted, r.Leases), "POST /provision → 202")
	t.row("berthd ready", msText(b.Ready.P50Ms), msText(b.Ready.P95Ms), msText(b.Ready.P99Ms), msText(b.Ready.MaxMs), msText(b.WallMs),
		fmt.Sprintf("%d/%d", b.Succeeded, r.Leases), "POST /provision → signed success callback")
	rawWhat := "network + create + start + verify wait + inspect"
	if raw.Error != "" {
		rawWhat = "did not run: " + raw.Error
	}
	t.row("raw docker", msText(raw.Ready.P50Ms), msText(raw.Ready.P95Ms), msText(raw.Ready.P99Ms), msText(raw.Ready.MaxMs), msText(raw.WallMs),
		fmt.Sprintf("%d/%d", raw.Launched, r.Leases), rawWhat)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nberthd/raw: p50 %s, wall %s (beyond the verify wait: p50 %s, wall %s)\n",
		ratioText(r.Ratio.P50), ratioText(r.Ratio.Wall), ratioText(r.Ratio.P50BeyondVerify), ratioText(r.Ratio.WallBeyondVerify))
	if len(raw.Phases) > 0 {
		var parts []string
		for _, phase := range rawPhases {
			parts = append(parts, phase+" "+cell(msText(raw.Phases[phase].P50Ms)))
		}
		fmt.Fprintf(out, "raw docker p50 by phase: %s\n", strings.Join(parts, ", "))
	}
	c := r.Callbacks
	fmt.Fprintf(out, "callbacks: %d received, %d signatures verified, %d bad\n", c.Received, c.Verified, c.BadSignatures)
	cl := r.Cleanup
	fmt.Fprintf(out, "cleanup: %d/%d deprovisioned, %d deprovisioned callbacks; left: %d in /provisions, %d in Docker, %d of the raw run\n",
		cl.Deprovisioned, r.Leases, cl.DeprovisionedCallbacks, len(cl.LeftInProvisions), len(cl.LeftInDocker), len(cl.RawLeft))
	for _, l := range r.PerLease {
		if l.Outcome != "success" {
			fmt.Fprintf(out, "lease %s: %s %s\n", l.Lease, l.Outcome, l.Error)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(out, "problem: %s\n", p)
	}
	_, err := fmt.Fprintf(out, "verdict: %s\n", r.Verdict)
	return err
}

// rawPhases are the raw launch's timed steps, in order.
var rawPhases = []string{"network", "create", "start", "inspect"}

// msText is a latency for people: "12ms" under a second, "5.62s" from one up,
// empty (the table's "-") when there is none.
func msText(v float64) string {
	switch {
	case v <= 0:
		return ""
	case v < 1000:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 2, 64) + "s"
}

func ratioText(v float64) string {
	if v <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "×"
}
