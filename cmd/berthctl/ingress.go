package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// printIngress is berthctl lease's names and custom domains (the "ingress" of
// GET /debug/leases/{lease}): every instance's name under the wildcard domain,
// then each custom domain, whether the running release routes it, and its DNS
// gate. Nothing when the lease has neither (ingress off).
func printIngress(out io.Writer, d leaseHistory) error {
	if d.IngressError != "" {
		_, err := fmt.Fprintf(out, "\nfqdns: unavailable: %s\n", cell(d.IngressError))
		return err
	}
	in := d.Ingress
	if in == nil {
		return nil
	}
	names, domains := 0, 0
	for _, s := range in.Services {
		names += len(s.FQDNs)
		if s.CustomDomain != "" || s.RoutedDomain != "" {
			domains++
		}
	}
	if err := section(out, "fqdns", names, func(t *table) {
		t.row("SERVICE", "INDEX", "FQDN")
		for _, s := range in.Services {
			for i, n := range s.FQDNs {
				t.row(s.Name, strconv.Itoa(i), n)
			}
		}
	}); err != nil {
		return err
	}
	heading := "custom domains"
	if in.GatesError != "" {
		heading += " (gates unavailable: " + in.GatesError + ")"
	}
	return section(out, heading, domains, func(t *table) {
		t.row("SERVICE", "DOMAIN", "ROUTED", "GATE", "ATTEMPTS", "LAST CHECK", "NEXT CHECK", "LAST RESULT")
		for _, s := range in.Services {
			if s.CustomDomain == "" && s.RoutedDomain == "" {
				continue
			}
			t.row(append([]string{s.Name, cmp.Or(s.CustomDomain, s.RoutedDomain), routed(s)}, gateCells(s.Gate)...)...)
		}
	})
}

// routed says whether the running release routes the service's custom domain.
func routed(s messages.ServiceIngress) string {
	switch {
	case s.RoutedDomain == "":
		return "no"
	case s.CustomDomain != "" && s.RoutedDomain != s.CustomDomain:
		return "as " + s.RoutedDomain // the item asks for another now
	}
	return "yes"
}

// gateCells are a gate's STATE, ATTEMPTS, LAST CHECK, NEXT CHECK and LAST
// RESULT cells ("-" each without a gate).
func gateCells(g *messages.DomainGateView) []string {
	if g == nil {
		return []string{"", "", "", "", ""}
	}
	state := g.State
	if g.Checking {
		state += " (checking)"
	}
	return []string{state, strconv.Itoa(g.Attempts), optionalTime(g.LastCheckAt), optionalTime(g.NextCheckAt), g.LastResult}
}

// printDomains is berthctl domains: every custom domain the DNS gate holds
// (GET /debug/domains), waiting or open, with its checks.
func (c *client) printDomains(page messages.DomainsSummary) error {
	if !page.Enabled {
		_, err := fmt.Fprintln(c.out, "no DNS gate: ingress is off")
		return err
	}
	if len(page.Gates) > 0 {
		t := newTable(c.out, "LEASE", "DOMAIN", "GATE", "SINCE", "ATTEMPTS", "LAST CHECK", "NEXT CHECK", "LAST RESULT")
		for _, g := range page.Gates {
			t.row(append([]string{g.LeaseUUID, g.Domain}, gateSince(g)...)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(c.out, "gates: %d\n", len(page.Gates))
	return err
}

// gateSince is a gate's cells with SINCE after its state.
func gateSince(g messages.DomainGateView) []string {
	cells := gateCells(&g)
	return append([]string{cells[0], timestamp(g.Since)}, cells[1:]...)
}
