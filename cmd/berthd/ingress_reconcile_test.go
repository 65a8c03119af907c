package main

// POST /reconcile_custom_domain through a real berthd, played as providerd
// plays it: every call signed, repeated like a reconcile tick. Adding,
// changing and removing a custom domain recreate the containers (same data)
// with the custom-domain router as asked; an identical call does nothing; bad
// input is refused and changes nothing; with the DNS gate on, a new domain
// waits for its gate, across a berthd restart.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

const reconcileSKUs = "\nsku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}}"

// reconcileDomain is providerd's call for lease, items as sent.
func (d *daemonProc) reconcileDomain(lease string, items ...messages.LeaseItem) response {
	d.t.Helper()
	return d.postJSON("/reconcile_custom_domain", messages.ReconcileCustomDomainRequest{LeaseUUID: lease, Items: items})
}

// reconcileAdmitted calls until the answer is not 503 lifecycle_pending (the
// previous redeploy's completion still being delivered), as the next ticks
// would, and wants 204.
func (d *daemonProc) reconcileAdmitted(lease string, items ...messages.LeaseItem) {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := d.reconcileDomain(lease, items...)
		if r.Status == http.StatusNoContent {
			return
		}
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "lifecycle_pending") || time.Now().After(deadline) {
			d.t.Fatalf("reconcile %s %+v: %d %s, want 204", lease, items, r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func statefulItem(domain string) messages.LeaseItem {
	return messages.LeaseItem{SKU: "stateful", Quantity: 1, CustomDomain: domain}
}

// customRouted checks that every container of lease routes domain through the
// custom-domain router (and carries fred.custom_domain), or, domain "", that no
// container has anything of a custom domain; the primary router stays.
func customRouted(t *testing.T, d *daemonProc, dc *client.Client, lease, domain string) {
	t.Helper()
	custom := "traefik.http.routers.fred-" + strings.ReplaceAll(lease, "-", "") + "-app-custom"
	for key, l := range ingressLabels(t, dc, lease) {
		if l["fred.fqdn"] == "" || l["traefik.http.routers.fred-"+strings.TrimSuffix(l["fred.fqdn"], ".apps.example.test")+".rule"] == "" {
			t.Fatalf("%s lost its primary router: %v", key, l)
		}
		if domain == "" {
			for k := range l {
				if strings.Contains(k, "-custom") || k == "fred.custom_domain" {
					t.Fatalf("%s still carries %s=%s with no custom domain", key, k, l[k])
				}
			}
			continue
		}
		if l["fred.custom_domain"] != domain || l[custom+".rule"] != "Host(`"+domain+"`)" || l[custom+".tls.certresolver"] != "http01" {
			t.Fatalf("%s does not route %s: %v", key, domain, l)
		}
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	prov := d.provisionInfo(lease)
	if info.Services["app"].FQDN != domain || prov.CustomDomains["app"] != domain || prov.Items[0].CustomDomain != domain {
		t.Fatalf("reported: /info fqdn %q, /provisions custom_domains %v items %+v; want %q",
			info.Services["app"].FQDN, prov.CustomDomains, prov.Items, domain)
	}
}

// unchanged checks that lease still runs exactly ids with n releases and n
// callbacks so far (nothing was redeployed or journaled as a release).
func unchanged(t *testing.T, d *daemonProc, dc *client.Client, cb *callbackReceiver, lease string, ids map[string]bool, n int, what string) {
	t.Helper()
	if got := containerIDs(t, dc, lease); !equalSets(got, ids) {
		t.Fatalf("%s: containers %v, want %v unchanged", what, got, ids)
	}
	if rs := d.releases(lease); len(rs) != n {
		t.Fatalf("%s: releases %s, want %d", what, releaseStatuses(rs), n)
	}
	if got := len(cb.forLease(lease)); got != n {
		t.Fatalf("%s: %d callbacks, want %d", what, got, n)
	}
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// redeployed waits for the lease's n-th callback, a successful custom-domain
// redeploy, and for Ready.
func redeployed(t *testing.T, d *daemonProc, cb *callbackReceiver, lease string, n int) {
	t.Helper()
	c := cb.waitFor(lease, n, 3*time.Minute)[n-1]
	if c.Body.Status != messages.CallbackSuccess || c.Body.MaintenanceID == "" || !strings.Contains(c.Path, "lifecycle_id=") {
		t.Fatalf("redeploy %d of %s: %+v at %s", n, lease, c.Body, c.Path)
	}
	d.waitStatus(lease, messages.StatusReady, time.Minute)
}

func TestIngressReconcile_Ungated_AddNoOpChangeRemove_DataKept_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, ingressTestConfig+reconcileSKUs).startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil), statefulItem(""))
	other := provisionReady(t, d, cb, flatManifest(nil), statefulItem("other.example.org"))
	put, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+hostPort(t, d, lease, "app", 0)+"/file?path=/data/kept.txt",
		strings.NewReader("tenant data"))
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("write /data: %v %v", resp, err)
	}
	dataKept := func(when string) {
		t.Helper()
		code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, lease, "app", 0), "/file?path=/data/kept.txt")
		if err != nil || code != 200 || body != "tenant data" {
			t.Fatalf("after %s /data/kept.txt: %d %q %v", when, code, body, err)
		}
	}
	customRouted(t, d, dc, lease, "")

	// Add: the containers are recreated with the custom-domain router.
	before := containerIDs(t, dc, lease)
	d.reconcileAdmitted(lease, statefulItem("shop.example.org"))
	redeployed(t, d, cb, lease, 2)
	customRouted(t, d, dc, lease, "shop.example.org")
	if after := containerIDs(t, dc, lease); equalSets(after, before) {
		t.Fatal("the add kept the old containers")
	}
	dataKept("the add")

	// No drift, in any spelling: 204, nothing recreated, no new release.
	ids := containerIDs(t, dc, lease)
	for _, spelled := range []string{"shop.example.org", "SHOP.Example.org."} {
		if r := d.reconcileDomain(lease, statefulItem(spelled)); r.Status != http.StatusNoContent {
			t.Fatalf("no drift (%s): %d %s", spelled, r.Status, r.Body)
		}
	}
	time.Sleep(time.Second)
	unchanged(t, d, dc, cb, lease, ids, 2, "an identical call")

	// Bad input: refused, nothing changes.
	for _, tc := range []struct {
		name   string
		body   []byte
		items  []messages.LeaseItem
		lease  string
		status int
		says   string
	}{
		{name: "malformed JSON", body: []byte(`{"lease_uuid":`), status: 400, says: "malformed"},
		{name: "bad lease UUID", lease: "not-a-uuid", items: []messages.LeaseItem{statefulItem("x.example.org")}, status: 400, says: "canonical UUID"},
		{name: "unknown service", items: []messages.LeaseItem{{SKU: "stateful", Quantity: 1, ServiceName: "web", CustomDomain: "x.example.org"}},
			status: 400, says: "not a service of this lease"},
		{name: "an IP", items: []messages.LeaseItem{statefulItem("203.0.113.7")}, status: 400, says: "IP address"},
		{name: "localhost", items: []messages.LeaseItem{statefulItem("localhost")}, status: 400, says: "fully qualified"},
		{name: "under the wildcard domain", items: []messages.LeaseItem{statefulItem("x.apps.example.test")}, status: 400, says: "wildcard domain"},
		{name: "another lease's domain", items: []messages.LeaseItem{statefulItem("Other.example.org")}, status: 409, says: "held by another lease"},
		{name: "an unknown lease: not provisioned here", lease: uuid.NewString(), items: []messages.LeaseItem{statefulItem("x.example.org")}, status: 204},
	} {
		var r response
		switch {
		case tc.body != nil:
			r = d.call(http.MethodPost, "/reconcile_custom_domain", tc.body)
		case tc.lease != "":
			r = d.reconcileDomain(tc.lease, tc.items...)
		default:
			r = d.reconcileDomain(lease, tc.items...)
		}
		if r.Status != tc.status || !strings.Contains(string(r.Body), tc.says) {
			t.Fatalf("%s: %d %s, want %d saying %q", tc.name, r.Status, r.Body, tc.status, tc.says)
		}
	}
	time.Sleep(time.Second)
	unchanged(t, d, dc, cb, lease, ids, 2, "refused calls")
	customRouted(t, d, dc, lease, "shop.example.org")

	// Change: the old router goes, the new one comes; the given-up domain is
	// claimable by another lease at once.
	d.reconcileAdmitted(lease, statefulItem("www.example.org"))
	redeployed(t, d, cb, lease, 3)
	customRouted(t, d, dc, lease, "www.example.org")
	dataKept("the change")
	d.reconcileAdmitted(other, statefulItem("shop.example.org"))
	redeployed(t, d, cb, other, 2)
	customRouted(t, d, dc, other, "shop.example.org")

	// Remove: no custom-domain label is left.
	d.reconcileAdmitted(lease, statefulItem(""))
	redeployed(t, d, cb, lease, 4)
	customRouted(t, d, dc, lease, "")
	dataKept("the removal")
	if rs := d.releases(lease); len(rs) != 4 {
		t.Fatalf("releases %s, want the provision and three redeploys", releaseStatuses(rs))
	}
	d.closeAll(dc, lease, other)
}

// With the DNS gate on a new domain routes nothing until its gate opens:
// the call is answered at once and journaled, survives a berthd restart, and
// one redeploy adds the router when both resolvers see the domain here.
func TestIngressReconcile_Gated_AddWaitsForTheGateAcrossARestart_ThenOneRedeploy(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	z1, z2 := startTestZone(t, "127.0.0.2", "198.51.100.9"), startTestZone(t, "127.0.0.3", "198.51.100.9")
	d := newDaemonDir(t, "ingress:\n  enabled: true\n  wildcard_domain: apps.example.test\n  entrypoint: websecure\n"+
		"  custom_domain_dns_resolvers: [\""+z1.addr+"\", \""+z2.addr+"\"]").startInProcess()
	item := messages.LeaseItem{SKU: "docker-micro", Quantity: 2}
	lease := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve"}}), item)
	ids := containerIDs(t, dc, lease)

	item.CustomDomain = "shop.example.org"
	for range 2 { // the second: no drift
		if r := d.reconcileDomain(lease, item); r.Status != http.StatusNoContent {
			t.Fatalf("reconcile: %d %s", r.Status, r.Body)
		}
	}
	time.Sleep(2 * time.Second)
	unchanged(t, d, dc, cb, lease, ids, 1, "waiting for the gate")
	if got := d.provisionInfo(lease); got.Items[0].CustomDomain != "shop.example.org" || got.CustomDomains["app"] != "" {
		t.Fatalf("/provisions items %+v custom_domains %v: want the domain asked for, not routed", got.Items, got.CustomDomains)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	d.startInProcess()
	d.waitStatus(lease, messages.StatusReady, time.Minute)
	if got := d.provisionInfo(lease); got.Items[0].CustomDomain != "shop.example.org" {
		t.Fatalf("after a restart /provisions items %+v: the asked-for domain was not kept", got.Items)
	}
	d.reconcileAdmitted(lease, item) // 503 lifecycle_pending until startup recovery is done
	unchanged(t, d, dc, cb, lease, ids, 1, "after the restart, still waiting")

	z1.point("127.0.0.1")
	z2.point("127.0.0.1")
	redeployed(t, d, cb, lease, 2)
	customRouted(t, d, dc, lease, "shop.example.org")
	time.Sleep(2 * time.Second)
	if n := len(cb.forLease(lease)); n != 2 {
		t.Fatalf("%d callbacks, want the provision's and the one redeploy's", n)
	}
	d.closeAll(dc, lease)
}
