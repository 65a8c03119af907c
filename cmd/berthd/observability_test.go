package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/knadh/koanf/parsers/yaml"
)

// The alert rules and the Grafana dashboard in deploy/ are checked against the
// real thing: promtool accepts the rules (and every dashboard query, as a
// recording rule), and every metric they name is exported by a running berthd
// that has provisioned a lease and restarted a crashed actor — with the labels
// they select and group by, for the families that have samples by then.

// alertExprs reads every rule's expression from a Prometheus rules file.
func alertExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	groups, _ := doc["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			out[fmt.Sprint(rule["alert"])] = fmt.Sprint(rule["expr"])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", path)
	}
	return out
}

// dashboardExprs reads every panel target's query, Grafana variables replaced
// by values Prometheus accepts.
func dashboardExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	out := map[string]string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = vars.Replace(tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no queries", path)
	}
	return out
}

// promtoolCheck runs `promtool check rules` on path.
func promtoolCheck(t *testing.T, promtool, path string) {
	t.Helper()
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", path, err, out)
	}
}

// exposition is what a scrape of /metrics tells: every family's type, and the
// label names its samples carry.
type exposition struct {
	types  map[string]string
	labels map[string]map[string]bool
}

func scrape(t *testing.T, url string) exposition {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	e := exposition{types: map[string]string{}, labels: map[string]map[string]bool{}}
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			e.types[f[2]] = f[3]
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		family := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(family, suffix); base != family && (e.types[base] == "histogram" || e.types[base] == "summary") {
				family = base
			}
		}
		if e.labels[family] == nil {
			e.labels[family] = map[string]bool{}
		}
		for _, l := range label.FindAllStringSubmatch(m[2], -1) {
			e.labels[family][l[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return e
}

// referenced is what one query asks of the exposition.
type referenced struct {
	metric string          // as written (may end in _bucket)
	family string          // its family
	labels map[string]bool // label names it selects on or groups by
}

var (
	metricRef   = regexp.MustCompile(`\b((?:berth|process|go)_[a-z0-9_]+)(\{[^}]*\})?`)
	matcherName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping    = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// references finds the exported metrics a query names, each with the labels of
// its own selector and, when it is the query's only metric, the grouping labels.
func references(expr string, e exposition) []referenced {
	var out []referenced
	for _, m := range metricRef.FindAllStringSubmatch(expr, -1) {
		r := referenced{metric: m[1], family: m[1], labels: map[string]bool{}}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(r.metric, suffix); base != r.metric && e.types[base] == "histogram" {
				r.family = base
			}
		}
		for _, l := range matcherName.FindAllStringSubmatch(m[2], -1) {
			r.labels[l[1]] = true
		}
		out = append(out, r)
	}
	if len(out) == 1 || (len(out) > 1 && allSame(out)) {
		for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					out[0].labels[l] = true
				}
			}
		}
	}
	return out
}

func allSame(rs []referenced) bool {
	for _, r := range rs {
		if r.family != rs[0].family {
			return false
		}
	}
	return true
}

// Labels Prometheus adds to every series (target labels) or that histograms carry.
var targetLabels = map[string]bool{"instance": true, "job": true, "le": true}

func TestObservability_RulesAndDashboardUseWhatBerthdExports(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		skipOrFail(t, "promtool is not installed (make promtool-up)")
	}
	dc := dockerClient(t)
	promtoolCheck(t, promtool, "deploy/alerts.yml")
	rules := alertExprs(t, "deploy/alerts.yml")
	panels := dashboardExprs(t, "deploy/grafana-dashboard.json")

	// Every dashboard query is valid PromQL: promtool checks it as a recording rule.
	var recording strings.Builder
	recording.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range panels {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		q, _ := json.Marshal(panels[k])
		fmt.Fprintf(&recording, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	recPath := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(recPath, []byte(recording.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	promtoolCheck(t, promtool, recPath)

	// A daemon that has done something: one lease provisioned and restarted
	// (the maintenance families have children only then), one actor crashed and
	// restarted by its supervisor.
	d := newDaemonDir(t).startInProcess()
	cb := newCallbackReceiver(t)
	lease := provisionReady(t, d, cb, flatManifest(nil))
	if r := d.maintain(lease, uuid.NewString(), nil); r.Status != http.StatusAccepted {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	cb.waitFor(lease, 2, 2*time.Minute) // provisioned, then the restart's completion
	d.crash("root/reaper")
	metricsURL := "http://" + d.api + "/metrics"
	deadline := time.Now().Add(30 * time.Second)
	var e exposition
	for {
		e = scrape(t, metricsURL)
		if e.labels["berth_actor_restarts_total"]["directive"] || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	check := func(where, expr string) {
		for _, r := range references(expr, e) {
			if _, ok := e.types[r.family]; !ok {
				t.Errorf("%s: %s is not exported by berthd (query: %s)", where, r.metric, expr)
				continue
			}
			have := e.labels[r.family]
			if len(have) == 0 {
				continue // no samples yet (e.g. no restart or update ran): labels unknown, the name is there
			}
			for l := range r.labels {
				if !targetLabels[l] && !have[l] {
					t.Errorf("%s: %s has no label %q (it has %v; query: %s)", where, r.family, l, slices.Sorted(func(yield func(string) bool) {
						for k := range have {
							if !yield(k) {
								return
							}
						}
					}), expr)
				}
			}
		}
	}
	for name, expr := range rules {
		check("alert "+name, expr)
	}
	for name, expr := range panels {
		check("panel "+name, expr)
	}
	// The families the brief's alerts stand on are all there, with samples.
	for _, want := range []string{"berth_callback_outbox_oldest_age_seconds", "berth_callback_attempts_total",
		"berth_unaccounted_containers", "berth_unaccounted_volumes", "berth_reconciliation_last_success_timestamp_seconds",
		"berth_actor_restarts_total", "berth_actor_awaiting_seconds", "berth_lease_transitions_total", "berth_retention_leaked_total", "berth_volume_holds",
		"process_start_time_seconds"} {
		if _, ok := e.labels[want]; !ok {
			t.Errorf("%s has no samples after a provision and an actor restart", want)
		}
	}
	d.closeAll(dc, lease)
}

func TestReferences_FindsNamesSelectorsAndGrouping(t *testing.T) {
	t.Parallel()
	e := exposition{types: map[string]string{"berth_x_seconds": "histogram", "berth_y_total": "counter"}}
	rs := references(`histogram_quantile(0.9, sum by (le, phase) (rate(berth_x_seconds_bucket{op="a",instance=~".*"}[5m])))`, e)
	if len(rs) != 1 || rs[0].family != "berth_x_seconds" || !rs[0].labels["op"] || !rs[0].labels["phase"] || !rs[0].labels["instance"] {
		t.Fatalf("histogram query: %+v", rs)
	}
	rs = references(`sum by (instance) (rate(berth_y_total{outcome=~"a|b"}[10m])) > 0 and on (instance) berth_x_seconds_count > 0`, e)
	if len(rs) != 2 || rs[0].family != "berth_y_total" || !rs[0].labels["outcome"] || rs[0].labels["instance"] || rs[1].family != "berth_x_seconds" {
		t.Fatalf("two metrics (grouping not attributed to either): %+v", rs)
	}
}
