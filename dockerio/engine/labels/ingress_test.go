package labels

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages/manifest"
)

const ingressLease = "0f8fad5b-d9cb-469f-a165-70867728950e"

func ingressPlan() dockerio.Plan {
	return dockerio.Plan{Lease: ingressLease, NetworkID: "n1", NetworkName: "berth-pool-abc",
		Ingress:  &ingress.Config{WildcardDomain: "apps.example.com", Entrypoint: "websecure", CertResolver: "http01"},
		Services: []dockerio.ServicePlan{{Service: manifest.Service{Ports: map[string]manifest.Port{"8080/tcp": {}}}, Name: "web", Quantity: 2}}}
}

func TestContainer_IngressOn_TraefikLabelsOnTheRealNetwork_OffNone(t *testing.T) {
	plan := ingressPlan()
	l := Container(plan, plan.Services[0], 1, time.Now())
	if l["traefik.docker.network"] != "berth-pool-abc" || l[ingress.LabelFQDN] != "web-1-0f8fad5bd9cb469fa16570867728950e.apps.example.com" {
		t.Fatalf("labels %v", l)
	}
	plan.Services[0].CustomDomain = "shop.example.org"
	if l := Container(plan, plan.Services[0], 1, time.Now()); l[ingress.LabelCustomDomain] != "shop.example.org" {
		t.Fatalf("custom domain not labelled: %v", l)
	}
	plan.Ingress = nil
	for k := range Container(plan, plan.Services[0], 1, time.Now()) {
		if strings.HasPrefix(k, "traefik.") || k == ingress.LabelFQDN {
			t.Fatalf("ingress off, yet %s", k)
		}
	}
}

func TestCheckIngress_RefusesAPlanWhoseLabelsCannotBeMade(t *testing.T) {
	if err := CheckIngress(ingressPlan()); err != nil {
		t.Fatalf("a good plan refused: %v", err)
	}
	for name, edit := range map[string]func(*dockerio.Plan){
		"no network name":   func(p *dockerio.Plan) { p.NetworkName = "" },
		"lease not a UUID":  func(p *dockerio.Plan) { p.Lease = "L" },
		"bad custom domain": func(p *dockerio.Plan) { p.Services[0].CustomDomain = "x.apps.example.com" },
		"wildcard too long": func(p *dockerio.Plan) { p.Ingress.WildcardDomain = strings.Repeat("a.", 110) + "com" },
	} {
		p := ingressPlan()
		edit(&p)
		if err := CheckIngress(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p := ingressPlan()
	p.Services[0].Ports = map[string]manifest.Port{"53/udp": {}}
	p.NetworkName = ""
	if err := CheckIngress(p); err != nil {
		t.Fatalf("a service with no routable port needs no labels, yet: %v", err)
	}
}
