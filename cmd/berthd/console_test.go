package main

// The operator's debug API and console against a real berthd on real Docker: what
// each endpoint says after a provision, and the console page in headless Chromium.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// debugJSON GETs a debug endpoint and decodes its 200 answer into the zeroed
// *into (so nothing of an earlier answer survives in it).
func (d *daemonProc) debugJSON(uri string, into any) {
	d.t.Helper()
	r := d.debugGet(uri)
	if r.Status != http.StatusOK {
		d.t.Fatalf("GET %s: %d %s", uri, r.Status, r.Body)
	}
	reflect.ValueOf(into).Elem().SetZero()
	r.json(d.t, into)
}

// eventually retries check every 100 ms until it returns "" or timeout passes,
// then fails with the last reason.
func eventually(t *testing.T, timeout time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := check()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sseEvent is one event of /debug/events.
type sseEvent struct {
	Event, ID string
	Data      json.RawMessage
}

// sseStream reads /debug/events until the test ends.
type sseStream struct {
	mu     sync.Mutex
	events []sseEvent
}

func openEvents(t *testing.T, d *daemonProc) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.debug+"/debug/events", nil)
	req.Header.Set("Authorization", "Bearer "+testDebugToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open /debug/events: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("/debug/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.Event != "" {
					s.mu.Lock()
					s.events = append(s.events, cur)
					s.mu.Unlock()
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				cur.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				cur.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *sseStream) of(event string) []sseEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sseEvent
	for _, e := range s.events {
		if e.Event == event {
			out = append(out, e)
		}
	}
	return out
}

// leaseTransitions is the from→to path of one lease in a list of transitions.
func leaseTransitions(all []messages.Transition, lease string) []string {
	var out []string
	for _, tr := range all {
		if tr.LeaseUUID == lease {
			out = append(out, tr.From+"→"+tr.To)
		}
	}
	return out
}

func findRow(rows []messages.LeaseRow, lease string) *messages.LeaseRow {
	for i := range rows {
		if rows[i].LeaseUUID == lease {
			return &rows[i]
		}
	}
	return nil
}

func TestDebugAPI_AProvisionedLeaseIsWhatEveryEndpointSays(t *testing.T) {
	// Sequential: reads a callback queued before its 5 s retry and a reconciler pass within 6 s.
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	stream := openEvents(t, d)

	lease := provisionReady(t, d, cb, flatManifest(nil))
	port := hostPort(t, d, lease, "app", 0)
	actorPath := "root/registry/lease-" + lease

	// GET /debug/leases: the row with its host port.
	var list struct {
		Leases []messages.LeaseRow `json:"leases"`
	}
	d.debugJSON("/debug/leases", &list)
	row := findRow(list.Leases, lease)
	if row == nil {
		t.Fatalf("/debug/leases lacks %s: %+v", lease, list.Leases)
	}
	if row.Status != "ready" || row.LeaseStatus != "ready" || row.Tenant != "tenant-test" || row.ProviderUUID != "provider-test" ||
		row.FailCount != 0 || row.TerminalBudget.Verdict != "retry" || row.Actor != actorPath || row.AgeSeconds <= 0 ||
		row.InstancesError != "" || row.RetainedUntil != nil {
		t.Fatalf("lease row = %+v", row)
	}
	if len(row.Items) != 1 || row.Items[0] != (messages.DebugItem{SKU: "docker-small", Quantity: 1, ServiceName: "app"}) {
		t.Fatalf("items = %+v", row.Items)
	}
	if len(row.Services) != 1 || row.Services[0].Name != "app" || len(row.Services[0].Instances) != 1 {
		t.Fatalf("services = %+v", row.Services)
	}
	inst := row.Services[0].Instances[0]
	if inst.Index != 0 || inst.State != "running" || len(inst.ContainerID) != 12 || inst.Image != testImage() ||
		inst.Ports["8080/tcp"] != (messages.PortBinding{HostIP: "127.0.0.1", HostPort: port}) {
		t.Fatalf("instance = %+v, want 8080/tcp on 127.0.0.1:%s", inst, port)
	}
	// The raw JSON carries exactly the agreed names.
	raw := string(d.debugGet("/debug/leases").Body)
	for _, field := range []string{`"lease_uuid"`, `"tenant"`, `"provider_uuid"`, `"status"`, `"created_at"`, `"age_seconds"`,
		`"fail_count"`, `"terminal_budget":{"verdict":"retry","consecutive_failures":0}`, `"items":[{"sku":"docker-small","quantity":1,"service_name":"app"}]`,
		`"services":[{"name":"app","instances":[{"index":0,"container_id"`, `"state":"running"`, `"image"`,
		`"ports":{"8080/tcp":{"host_ip":"127.0.0.1","host_port":"` + port + `"}}`} {
		if !strings.Contains(raw, field) {
			t.Errorf("/debug/leases lacks %s in %s", field, raw)
		}
	}
	for uri, want := range map[string]bool{
		"/debug/leases?status=ready": true, "/debug/leases?status=failed": false,
		"/debug/leases?tenant=tenant-test": true, "/debug/leases?tenant=someone-else": false,
		"/debug/leases?status=ready&tenant=tenant-test": true,
	} {
		d.debugJSON(uri, &list)
		if got := findRow(list.Leases, lease) != nil; got != want {
			t.Errorf("%s lists the lease: %t, want %t", uri, got, want)
		}
	}
	if r := d.debugGet("/debug/leases?status=bogus"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"error"`) {
		t.Errorf("status=bogus: %d %s, want a JSON 400", r.Status, r.Body)
	}

	// GET /debug/leases/{lease}: events in journal order, the delivered success
	// callback, the release, no diagnostics.
	var hist messages.LeaseHistory
	eventually(t, 10*time.Second, func() string {
		d.debugJSON("/debug/leases/"+lease, &hist)
		for _, c := range hist.Callbacks {
			if c.State == messages.CallbackDelivered {
				return ""
			}
		}
		return fmt.Sprintf("no delivered callback in %+v", hist.Callbacks)
	})
	if hist.Lease.LeaseUUID != lease || hist.Lease.Actor != actorPath || hist.Lease.Services[0].Instances[0].Ports["8080/tcp"].HostPort != port {
		t.Fatalf("history lease = %+v", hist.Lease)
	}
	var types []string
	for i, e := range hist.Events {
		types = append(types, e.Type)
		if e.Seq != uint64(i+1) || e.At.IsZero() || !strings.HasPrefix(e.Summary, e.Type) || len(e.Data) == 0 {
			t.Errorf("event %d = %+v", i, e)
		}
	}
	if want := []string{"provision.started", "release.pinned", "provision.succeeded"}; !slices.Equal(types, want) {
		t.Fatalf("events = %v, want %v", types, want)
	}
	if s := hist.Events[2].Summary; !strings.Contains(s, "app/0 127.0.0.1:"+port) {
		t.Errorf("provision.succeeded summary %q does not name the instance and its port", s)
	}
	if hist.CompactedBeforeSeq != 0 {
		t.Errorf("compacted_before_seq = %d with 3 events", hist.CompactedBeforeSeq)
	}
	if len(hist.Callbacks) != 1 {
		t.Fatalf("callbacks = %+v, want the one success callback", hist.Callbacks)
	}
	if c := hist.Callbacks[0]; c.Kind != "operation" || c.Status != messages.CallbackSuccess || c.URLPath != "/callbacks/provision" ||
		c.Attempts != 1 || c.LastError != "" || c.DeliveredAt == nil || c.LastAttemptAt == nil || c.DeliveryID != cb.forLease(lease)[0].DeliveryID {
		t.Fatalf("callback = %+v", c)
	}
	if len(hist.Releases) != 1 || hist.Releases[0].Version != 1 || hist.Releases[0].Status != messages.ReleaseActive {
		t.Fatalf("releases = %+v", hist.Releases)
	}
	if hist.Diagnostics == nil || len(hist.Diagnostics) != 0 {
		t.Fatalf("diagnostics = %#v, want []", hist.Diagnostics)
	}
	for _, uri := range []string{"/debug/leases/" + uuid.NewString(), "/debug/leases/not-a-lease"} {
		if r := d.debugGet(uri); r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `"error"`) {
			t.Errorf("GET %s: %d %s, want a JSON 404", uri, r.Status, r.Body)
		}
	}

	// GET /debug/outbox: a second lease whose receiver refuses twice keeps its
	// success callback queued, with the attempts and the error, until the third.
	second := uuid.NewString()
	cb.failNext(second, 2)
	if r := d.provision(second, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	var ob messages.OutboxSummary
	eventually(t, 2*time.Minute, func() string {
		d.debugJSON("/debug/outbox", &ob)
		if ob.TotalQueued == 1 && len(ob.Leases) == 1 && ob.Leases[0].Attempts >= 1 {
			return ""
		}
		return fmt.Sprintf("outbox = %+v", ob)
	})
	if l := ob.Leases[0]; l.LeaseUUID != second || l.Queued != 1 || l.Kinds["operation"] != 1 || !strings.Contains(l.LastError, "status 500") ||
		l.OldestAt.IsZero() || l.OldestAgeSeconds < 0 || l.LastAttemptAt == nil {
		t.Fatalf("outbox lease = %+v", l)
	}
	d.debugJSON("/debug/leases/"+second, &hist)
	if len(hist.Callbacks) != 1 || hist.Callbacks[0].State != messages.CallbackQueued || hist.Callbacks[0].Attempts < 1 {
		t.Fatalf("queued callback = %+v", hist.Callbacks)
	}
	cb.waitFor(second, 1, time.Minute)
	eventually(t, 10*time.Second, func() string {
		d.debugJSON("/debug/outbox", &ob)
		d.debugJSON("/debug/leases/"+second, &hist)
		if ob.TotalQueued == 0 && len(ob.Leases) == 0 && len(hist.Callbacks) == 1 && hist.Callbacks[0].State == messages.CallbackDelivered {
			return ""
		}
		return fmt.Sprintf("outbox = %+v, callbacks = %+v", ob, hist.Callbacks)
	})
	if c := hist.Callbacks[0]; c.Attempts != 3 || !strings.Contains(c.LastError, "status 500") {
		t.Fatalf("delivered after two refusals: %+v, want 3 attempts and the last refusal", c)
	}

	// GET /debug/freshness: every background actor has passed since the start.
	var fr struct {
		Passes []messages.Freshness `json:"passes"`
	}
	eventually(t, 20*time.Second, func() string {
		d.debugJSON("/debug/freshness", &fr)
		var names []string
		for _, p := range fr.Passes {
			names = append(names, p.Name)
			if p.Status != messages.FreshnessFresh || p.Outcome != "ok" || p.LastPassAt == nil || p.Passes < 1 {
				return fmt.Sprintf("pass %+v", p)
			}
		}
		if !slices.Equal(names, []string{"reconciler", "reclaimer", "netpool", "reaper", "imagegc"}) {
			return fmt.Sprintf("passes %v", names)
		}
		return ""
	})
	if p := fr.Passes[0]; p.IntervalSeconds != 3 || p.AgeSeconds > 6 {
		t.Errorf("reconciler = %+v, want a 3 s interval and a pass within two", p)
	}

	// GET /debug/transitions: reserved → provisioning → ready, and paging.
	var trs messages.TransitionsReply
	d.debugJSON("/debug/transitions?since=0&limit=1024", &trs)
	if got, want := leaseTransitions(trs.Transitions, lease), []string{"→reserved", "reserved→provisioning", "provisioning→ready"}; !slices.Equal(got, want) {
		t.Fatalf("transitions of the lease = %v, want %v (all: %+v)", got, want, trs.Transitions)
	}
	for i := 1; i < len(trs.Transitions); i++ {
		if trs.Transitions[i].Seq != trs.Transitions[i-1].Seq+1 {
			t.Fatalf("seqs not consecutive: %+v", trs.Transitions)
		}
	}
	if last := trs.Transitions[len(trs.Transitions)-1]; trs.Next != last.Seq {
		t.Fatalf("next = %d, last seq %d", trs.Next, last.Seq)
	}
	var page messages.TransitionsReply
	d.debugJSON("/debug/transitions?limit=1", &page)
	if len(page.Transitions) != 1 || page.Transitions[0].Seq != 1 || page.Next != 1 {
		t.Fatalf("limit=1: %+v", page)
	}
	d.debugJSON("/debug/transitions?since="+strconv.FormatUint(trs.Next, 10), &page)
	if len(page.Transitions) != 0 || page.Next != trs.Next {
		t.Fatalf("since=next: %+v", page)
	}
	for _, q := range []string{"since=-1", "since=x", "limit=0", "limit=1025"} {
		if r := d.debugGet("/debug/transitions?" + q); r.Status != http.StatusBadRequest {
			t.Errorf("transitions?%s: %d %s, want 400", q, r.Status, r.Body)
		}
	}

	// GET /debug/events: the same transitions, and the tree with the lease actor.
	eventually(t, 5*time.Second, func() string {
		var got []messages.Transition
		for _, e := range stream.of("transition") {
			var tr messages.Transition
			if err := json.Unmarshal(e.Data, &tr); err != nil || e.ID != strconv.FormatUint(tr.Seq, 10) {
				return fmt.Sprintf("transition event %+v: %v", e, err)
			}
			got = append(got, tr)
		}
		if p := leaseTransitions(got, lease); !slices.Equal(p, []string{"→reserved", "reserved→provisioning", "provisioning→ready"}) {
			return fmt.Sprintf("streamed transitions of the lease: %v", p)
		}
		trees := stream.of("tree")
		if len(trees) == 0 || !strings.Contains(string(trees[len(trees)-1].Data), `"path":"`+actorPath+`"`) {
			return fmt.Sprintf("%d tree events, the last without %s", len(trees), actorPath)
		}
		return ""
	})

	// After the close, the history outlives the lease.
	d.closeAll(dc, lease, second)
	d.debugJSON("/debug/leases/"+lease, &hist)
	if hist.Lease.Status != "closed" || hist.Lease.Actor != "" || hist.Events[len(hist.Events)-1].Type != "closed" || len(hist.Releases) != 0 {
		t.Fatalf("history after close: lease %+v, events %v", hist.Lease, hist.Events)
	}
	d.debugJSON("/debug/leases", &list)
	if findRow(list.Leases, lease) != nil {
		t.Fatalf("a closed lease is still listed: %+v", list.Leases)
	}
	d.debugJSON("/debug/transitions?limit=1024", &trs)
	if got := leaseTransitions(trs.Transitions, lease); !slices.Equal(got[len(got)-2:], []string{"ready→deprovisioning", "deprovisioning→closed"}) {
		t.Fatalf("transitions after close: %v", got)
	}
}

// chromiumBinary finds Debian's chromium ("chromium", or "chromium-browser").
func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipOrFail(t, "no chromium or chromium-browser on PATH (make chromium-up installs it)")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the DOM once the page's
// scripts have had virtualMS of virtual time (its fetches complete in real time
// meanwhile; the clock does not move while one is pending).
// A browser that dies (Debian's chromium has segfaulted here under load) is
// tried once more and reported as a browser crash, not as the console's.
func dumpDOM(t *testing.T, bin, url string, virtualMS int) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, stderr, err := runChromium(bin, t.TempDir(), url, virtualMS)
		if err == nil {
			return out
		}
		if attempt == 1 {
			t.Logf("browser crash (not the console's): chromium --dump-dom %s: %v; trying once more\n%s", url, err, tail(stderr, 2000))
			continue
		}
		t.Fatalf("browser crash, twice: chromium --dump-dom %s: %v\n%s", url, err, stderr)
	}
}

// runChromium is one headless chromium --dump-dom of url.
func runChromium(bin, profile, url string, virtualMS int) (dom, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, fmt.Sprintf("--virtual-time-budget=%d", virtualMS), "--dump-dom", url)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	return string(out), errOut.String(), err
}

func TestConsole_HeadlessChromiumShowsTheLeaseAndItsActorsRestart(t *testing.T) {
	// Sequential: asserts a reload shows the restart within one 2 s refresh (Chromium is CPU-heavy too).
	bin := chromiumBinary(t)
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil))
	t.Cleanup(func() { d.closeAll(dc, lease) }) // also when an assertion fails: what the test made goes
	port := hostPort(t, d, lease, "app", 0)
	actorPath := "root/registry/lease-" + lease
	page := "http://" + d.debug + "/?token=" + testDebugToken

	// Without the token the page is not served.
	if resp, err := http.Get("http://" + d.debug + "/"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET / without the token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	restartsRe := regexp.MustCompile(`<li data-actor="` + regexp.QuoteMeta(actorPath) + `"[^>]*data-restarts="(\d+)"`)
	leaseRe := regexp.MustCompile(`<tr data-lease="` + regexp.QuoteMeta(lease) + `" data-status="ready"`)
	restarts := func(dom string) int {
		m := restartsRe.FindStringSubmatch(dom)
		if m == nil {
			return -1
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}

	start := time.Now()
	dom := dumpDOM(t, bin, page, 5000)
	firstLoad := time.Since(start)
	if !leaseRe.MatchString(dom) {
		t.Fatalf("the console shows no ready row data-lease=%q:\n%s", lease, dom)
	}
	if !strings.Contains(dom, "127.0.0.1:"+port+" → app/0 8080/tcp") {
		t.Errorf("the lease row does not show its host port %s", port)
	}
	if got := restarts(dom); got != 0 {
		t.Fatalf("lease actor %s: data-restarts %d, want 0 (-1: not shown):\n%s", actorPath, got, dom)
	}
	for _, id := range []string{`data-pass="reconciler"`, `id="outbox"`, `data-transition-lease="` + lease + `"`} {
		if !strings.Contains(dom, id) {
			t.Errorf("the console lacks %s", id)
		}
	}
	if strings.Contains(dom, testDebugToken) {
		t.Fatal("the page echoes the debug token")
	}

	// Crash the lease actor; a reload within one refresh (2 s) shows the restart.
	d.crash(actorPath)
	crashed := time.Now()
	for {
		dom = dumpDOM(t, bin, page, 5000)
		if restarts(dom) >= 1 {
			break
		}
		if time.Since(crashed) > 2*time.Second+firstLoad {
			t.Fatalf("%s after the crash the console still shows data-restarts %d for %s:\n%s", time.Since(crashed), restarts(dom), actorPath, dom)
		}
	}
	if !leaseRe.MatchString(dom) {
		t.Fatalf("after its actor restarted the lease row is not ready:\n%s", dom)
	}

	// A lease's history opens from its row's link (#lease=…).
	dom = dumpDOM(t, bin, page+"#lease="+lease, 5000)
	for _, want := range []string{`data-detail-lease="` + lease + `"`, `data-event-type="provision.succeeded"`,
		`data-state="delivered"`, `data-release="1"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the lease's history lacks %s", want)
		}
	}
	t.Logf("chromium: first load %s, %s from the crash to a page showing the restart", firstLoad.Round(time.Millisecond),
		time.Since(crashed).Round(time.Millisecond))
}
