package main

// Ingress across a restore and a berthd restart, on the real engine: a lease
// with a routed custom domain closes retaining its data; POST /restore brings
// the data into a new lease whose names are its own — computed from its UUID,
// none of the source's — with the custom domain routed again and
// traefik.docker.network naming the network its containers are really on.
// berthd is then killed (-9) and started again: the same containers with the
// same labels, and /info, /provisions and the debug API say the same names.
// (ingress_test.go covers /info and /provisions across a clean restart of
// leases without a custom domain.)

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
)

func TestIngressRestore_NewLeasesOwnNames_CustomDomainRoutedAgain_SameLabelsAfterKill9(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	// No warm pool: the kill -9 leaves no pool network to the stop's trim.
	d := newDaemonDir(t, ingressTestConfig, "retain_on_close: true", "network_pool_size: 0").startChild(true)
	const domain = "keep.example.org"
	item := messages.LeaseItem{SKU: "docker-small", Quantity: 2, CustomDomain: domain}
	src := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve"}}), item)
	srcLabels := checkLeaseNames(t, d, dc, src, domain)

	d.deprovisionUntilGone(src)
	dest := uuid.NewString()
	if r := d.postJSON("/restore", messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: src, Tenant: "tenant-test",
		ProviderUUID: "provider-test", Items: []messages.LeaseItem{item}, CallbackURL: cb.callbackURL()}); r.Status != 202 {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(dest, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("restore callback: %+v", got[0].Body)
	}
	d.waitStatus(dest, messages.StatusReady, time.Minute)
	labels := checkLeaseNames(t, d, dc, dest, domain)
	srcHex := strings.ReplaceAll(src, "-", "")
	for key, l := range labels {
		for k, v := range l {
			if strings.Contains(k, srcHex) || strings.Contains(v, srcHex) || v == srcLabels[key]["fred.fqdn"] {
				t.Fatalf("%s of the restored lease carries the source's name: %s=%s", key, k, v)
			}
		}
	}
	ids := containerIDs(t, dc, dest)

	// kill -9, and a start without retain_on_close (the test's last close
	// leaves no data behind): the same containers, the same labels, the same
	// names reported.
	d.kill9()
	d.reconfigure(ingressTestConfig, "network_pool_size: 0")
	d.startChild(true)
	d.waitStatus(dest, messages.StatusReady, time.Minute)
	if after := containerIDs(t, dc, dest); !maps.Equal(after, ids) || len(ids) != 2 {
		t.Fatalf("containers %v after the restart, want %v", after, ids)
	}
	if after := checkLeaseNames(t, d, dc, dest, domain); !equalLabelSets(after, labels) {
		t.Fatalf("the restart changed the labels:\n%v\n%v", labels, after)
	}
	d.closeAll(dc, dest)
}

// checkLeaseNames checks a ready flat lease of two app instances whose custom
// domain is routed: each instance's fred.fqdn is the name computed from the
// lease's UUID, with its own router and the custom-domain router; /info,
// /provisions and the debug API's ingress say the same. It returns the labels.
func checkLeaseNames(t *testing.T, d *daemonProc, dc *client.Client, lease, domain string) map[string]map[string]string {
	t.Helper()
	want, err := ingress.LeaseFQDNs(lease, map[string]int{"app": 2}, "apps.example.test")
	if err != nil {
		t.Fatal(err)
	}
	labels := ingressLabels(t, dc, lease)
	checkIngressNames(t, withoutCustom(labels), map[string]string{"app/0": "8080", "app/1": "8080"}, map[string]string{})
	custom := "traefik.http.routers.fred-" + strings.ReplaceAll(lease, "-", "") + "-app-custom.rule"
	for i, name := range want["app"] {
		l := labels["app/"+strconv.Itoa(i)]
		if l["fred.fqdn"] != name || l["fred.custom_domain"] != domain || l[custom] != "Host(`"+domain+"`)" {
			t.Fatalf("%s app/%d: labels %v, want fred.fqdn %s and the %s router", lease, i, l, name, domain)
		}
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	prov := d.provisionInfo(lease)
	if info.Services["app"].FQDN != domain || prov.CustomDomains["app"] != domain || !slices.Equal(prov.FQDNs["app"], want["app"]) {
		t.Fatalf("%s: /info service fqdn %q, /provisions %v %v", lease, info.Services["app"].FQDN, prov.FQDNs, prov.CustomDomains)
	}
	for _, inst := range info.Services["app"].Instances {
		if inst.FQDN != want["app"][inst.InstanceIndex] {
			t.Fatalf("%s: /info app/%d fqdn %q", lease, inst.InstanceIndex, inst.FQDN)
		}
	}
	var h struct {
		Ingress *messages.LeaseIngress `json:"ingress"`
	}
	d.debugJSON("/debug/leases/"+lease, &h)
	if in := h.Ingress; in == nil || len(in.Services) != 1 || !slices.Equal(in.Services[0].FQDNs, want["app"]) ||
		in.Services[0].RoutedDomain != domain || in.Services[0].Gate == nil || in.Services[0].Gate.State != messages.GateForgotten {
		t.Fatalf("%s: the debug API's ingress %+v", lease, in)
	}
	return labels
}

// withoutCustom is labels without the custom-domain router's, service's and
// fred.custom_domain (checkIngressNames holds the rest to the exact set).
func withoutCustom(labels map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for key, l := range labels {
		out[key] = maps.Clone(l)
		maps.DeleteFunc(out[key], func(k, _ string) bool { return k == "fred.custom_domain" || strings.Contains(k, "-custom.") })
	}
	return out
}
