package main

// Ingress on the real engine: the Traefik labels Docker shows on real
// containers of flat and stack leases, one and many instances, long service
// names; each name a valid DNS name, unique, under the wildcard domain; the
// port chosen in the seed's order; traefik.docker.network naming the network
// the container is really on (a warm pool network, not fred-<lease>); the
// same names across a restart and an update.

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

const ingressTestConfig = "ingress:\n  enabled: true\n  wildcard_domain: apps.example.test\n  entrypoint: websecure\n" +
	"  custom_domain_dns_check_disabled: true"

// ingressLabels is every label of lease's containers Traefik reads, with
// fred.fqdn, by "<service>/<index>"; it checks each container's
// traefik.docker.network names the one network Docker shows it on.
func ingressLabels(t *testing.T, dc *client.Client, lease string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, s := range leaseContainers(t, dc, lease) {
		c, err := dc.ContainerInspect(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		l := c.Config.Labels
		key := l["fred.service_name"] + "/" + l["fred.instance_index"]
		got := map[string]string{}
		for k, v := range l {
			if strings.HasPrefix(k, "traefik.") || k == "fred.fqdn" || k == "fred.custom_domain" {
				got[k] = v
			}
		}
		if len(got) == 0 {
			out[key] = got
			continue
		}
		if len(c.NetworkSettings.Networks) != 1 {
			t.Fatalf("%s is on %d networks, want 1", key, len(c.NetworkSettings.Networks))
		}
		for name := range c.NetworkSettings.Networks {
			if got["traefik.docker.network"] != name {
				t.Fatalf("%s: traefik.docker.network %q, but the container is on %q", key, got["traefik.docker.network"], name)
			}
		}
		out[key] = got
	}
	return out
}

// checkIngressNames checks every container's name: a DNS name of labels of at
// most 63 characters under the wildcard domain, unique, with one router and one
// service of its own bound explicitly to want[key]'s port (0: no labels at all).
func checkIngressNames(t *testing.T, all map[string]map[string]string, want map[string]string, seen map[string]string) {
	t.Helper()
	for key, port := range want {
		l, ok := all[key]
		if !ok {
			t.Fatalf("no container %s", key)
		}
		if port == "" {
			if len(l) != 0 {
				t.Fatalf("%s has no routable TCP port but carries %v", key, l)
			}
			continue
		}
		fqdn := l["fred.fqdn"]
		if !strings.HasSuffix(fqdn, ".apps.example.test") || len(fqdn) > 253 {
			t.Fatalf("%s: fred.fqdn %q", key, fqdn)
		}
		for _, part := range strings.Split(fqdn, ".") {
			if part == "" || len(part) > 63 {
				t.Fatalf("%s: label %q of %q", key, part, fqdn)
			}
		}
		if other, dup := seen[fqdn]; dup {
			t.Fatalf("%s and %s share %s", key, other, fqdn)
		}
		seen[fqdn] = key
		router := "fred-" + strings.TrimSuffix(fqdn, ".apps.example.test")
		r := "traefik.http.routers." + router
		wantLabels := map[string]string{
			"traefik.enable": "true", r + ".rule": "Host(`" + fqdn + "`)", r + ".entrypoints": "websecure",
			r + ".tls": "true", r + ".service": router, "traefik.http.services." + router + ".loadbalancer.server.port": port,
			"traefik.docker.network": l["traefik.docker.network"], "fred.fqdn": fqdn,
		}
		if !maps.Equal(l, wantLabels) {
			t.Fatalf("%s labels\n %v\nwant\n %v", key, l, wantLabels)
		}
	}
}

func TestIngress_RealContainers_LabelsNamesPortsAndNetwork_StableAcrossRestartAndUpdate(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, ingressTestConfig).startInProcess()
	long := strings.Repeat("long-service-name-", 3) + "abcdefghi" // 63 characters
	ports := func(keys ...string) map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			m[k] = map[string]any{}
		}
		return m
	}
	svc := func(p map[string]any) map[string]any {
		return map[string]any{"image": testImage(), "args": []string{"serve"}, "ports": p}
	}
	hinted := ports("8080/tcp", "9000/tcp", "80/tcp")
	hinted["9000/tcp"] = map[string]any{"ingress": true}
	stack := map[string]any{"services": map[string]any{
		long:     svc(ports("9001/tcp", "9000/tcp")), // the lowest TCP port
		"web":    svc(ports("8080/tcp", "80/tcp")),   // 80 before 8080
		"api":    svc(hinted),                        // the manifest's hint first
		"alt":    svc(ports("8080/tcp", "7000/tcp")), // 8080 before a lower port
		"metric": svc(ports("9125/udp")),             // UDP alone: not routable
	}}
	flat := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve"}}),
		messages.LeaseItem{SKU: "docker-micro", Quantity: 3})
	st := provisionReady(t, d, cb, stack,
		messages.LeaseItem{SKU: "docker-micro", Quantity: 2, ServiceName: long},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "web"},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "api"},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "alt"},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "metric"})

	wantFlat := map[string]string{"app/0": "8080", "app/1": "8080", "app/2": "8080"}
	wantStack := map[string]string{long + "/0": "9000", long + "/1": "9000", "web/0": "80", "api/0": "9000", "alt/0": "8080", "metric/0": ""}
	seen := map[string]string{}
	flatBefore, stackBefore := ingressLabels(t, dc, flat), ingressLabels(t, dc, st)
	checkIngressNames(t, flatBefore, wantFlat, seen)
	checkIngressNames(t, stackBefore, wantStack, seen)
	if n := flatBefore["app/0"]["traefik.docker.network"]; !strings.HasPrefix(n, "berth-pool-") {
		t.Fatalf("the flat lease runs on %q: want a warm pool network (its real name, not fred-<lease>)", n)
	}

	// A restart and an update recreate every container: the same names, ports
	// and network.
	if r := d.maintain(flat, uuid.NewString(), nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	stack["services"].(map[string]any)["web"].(map[string]any)["env"] = map[string]any{"CHANGED": "1"}
	if r := d.maintain(st, uuid.NewString(), stack); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	for _, l := range []string{flat, st} {
		if got := cb.waitFor(l, 2, 2*time.Minute); got[1].Body.Status != messages.CallbackSuccess {
			t.Fatalf("maintenance of %s: %+v", l, got[1].Body)
		}
	}
	if after := ingressLabels(t, dc, flat); !equalLabelSets(after, flatBefore) {
		t.Fatalf("restart changed the flat lease's labels:\n%v\n%v", flatBefore, after)
	}
	if after := ingressLabels(t, dc, st); !equalLabelSets(after, stackBefore) {
		t.Fatalf("update changed the stack lease's labels:\n%v\n%v", stackBefore, after)
	}
	// GET /info and GET /provisions report each instance's fred.fqdn, and
	// still do after a berthd restart.
	checkReportedFQDNs(t, d, flat, flatBefore)
	checkReportedFQDNs(t, d, st, stackBefore)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	d.startInProcess()
	d.waitStatus(st, messages.StatusReady, time.Minute)
	checkReportedFQDNs(t, d, flat, flatBefore)
	checkReportedFQDNs(t, d, st, stackBefore)
	d.closeAll(dc, flat, st)
}

// checkReportedFQDNs checks GET /info's instance fqdn and GET /provisions'
// fqdns against the fred.fqdn labels Docker shows: a service with no routable
// port has none; no custom domain is routed, so no service has a fqdn.
func checkReportedFQDNs(t *testing.T, d *daemonProc, lease string, labels map[string]map[string]string) {
	t.Helper()
	var info messages.LeaseInfo
	if r := d.get("/info/" + lease); r.Status != 200 {
		t.Fatalf("info: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &info)
	}
	prov := d.provisionInfo(lease)
	n := 0
	for name, svc := range info.Services {
		if svc.FQDN != "" {
			t.Fatalf("service %s reports fqdn %q with no custom domain", name, svc.FQDN)
		}
		for _, inst := range svc.Instances {
			key := name + "/" + strconv.Itoa(inst.InstanceIndex)
			want := labels[key]["fred.fqdn"]
			var listed string
			if names := prov.FQDNs[name]; inst.InstanceIndex < len(names) {
				listed = names[inst.InstanceIndex]
			}
			if inst.FQDN != want || listed != want {
				t.Fatalf("%s: /info fqdn %q, /provisions %q, label %q", key, inst.FQDN, listed, want)
			}
			n++
		}
	}
	if n != len(labels) {
		t.Fatalf("/info lists %d instances, Docker %d", n, len(labels))
	}
}

func equalLabelSets(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}

// With the DNS gate disabled a custom domain is routed from the first launch:
// a second router and service with the cert resolver and middlewares on every
// instance. Bad domains are refused with 400 and a domain another lease holds
// with 409; neither creates anything.
func TestIngress_CustomDomain_UngatedRoutedAtOnce_BadOrClaimedDomainsRefused(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, ingressTestConfig).startInProcess()
	manifest := flatManifest(map[string]any{"args": []string{"serve"}})
	lease := provisionReady(t, d, cb, manifest, messages.LeaseItem{SKU: "docker-micro", Quantity: 2, CustomDomain: "Shop.Example.org."})

	custom := "fred-" + strings.ReplaceAll(lease, "-", "") + "-app-custom"
	r := "traefik.http.routers." + custom
	for key, l := range ingressLabels(t, dc, lease) {
		want := map[string]string{r + ".rule": "Host(`shop.example.org`)", r + ".entrypoints": "websecure", r + ".tls": "true",
			r + ".tls.certresolver": "http01", r + ".middlewares": "security-headers@file", r + ".service": custom,
			"traefik.http.services." + custom + ".loadbalancer.server.port": "8080", "fred.custom_domain": "shop.example.org"}
		for k, v := range want {
			if l[k] != v {
				t.Fatalf("%s: %s = %q, want %q (labels %v)", key, k, l[k], v, l)
			}
		}
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	if info.Services["app"].FQDN != "shop.example.org" || d.provisionInfo(lease).CustomDomains["app"] != "shop.example.org" {
		t.Fatalf("service fqdn %q, /provisions custom_domains %v", info.Services["app"].FQDN, d.provisionInfo(lease).CustomDomains)
	}

	for _, tc := range []struct {
		name, domain string
		status       int
		says         string
	}{
		{"localhost", "localhost", 400, "fully qualified"},
		{"localhost subdomain", "app.localhost", 400, "localhost"},
		{"an IP", "203.0.113.7", 400, "IP address"},
		{"under the wildcard domain", "x.apps.example.test", 400, "wildcard domain"},
		{"300 characters", strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." +
			strings.Repeat("d", 60) + "." + strings.Repeat("e", 55) + ".com", 400, "at most 253"},
		{"unicode look-alike", "shоp.example.org", 400, "only ASCII"}, // Cyrillic о
		{"held by another lease", "shop.example.org", 409, "held by another lease"},
		{"held, in another spelling", "SHOP.example.org.", 409, "held by another lease"},
	} {
		other := uuid.NewString()
		resp := d.provision(other, cb.callbackURL(), manifest, messages.LeaseItem{SKU: "docker-micro", Quantity: 1, CustomDomain: tc.domain})
		if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.says) {
			t.Fatalf("%s: %d %s, want %d saying %q", tc.name, resp.Status, resp.Body, tc.status, tc.says)
		}
		if got := d.get("/provisions/" + other); got.Status != 404 || len(leaseContainers(t, dc, other)) != 0 {
			t.Fatalf("%s: the refused lease exists: %d %s", tc.name, got.Status, got.Body)
		}
	}
	d.closeAll(dc, lease)
	// Closed, the domain is free again.
	again := provisionReady(t, d, cb, manifest, messages.LeaseItem{SKU: "docker-micro", Quantity: 1, CustomDomain: "shop.example.org"})
	d.closeAll(dc, again)
}
