package main

import (
	"flag"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages"
)

// leases lists the live leases from the debug read model (GET /debug/leases),
// filtered by the daemon on status and tenant.
func (c *client) leases(args []string) error {
	fs := flag.NewFlagSet("leases", flag.ContinueOnError)
	status := fs.String("status", "", "only leases in this status (e.g. ready, failed)")
	tenant := fs.String("tenant", "", "only this tenant's leases")
	_, asJSON, err := parseView(fs, args, 0, "usage: berthctl leases [-status S] [-tenant T] [-o table|json]")
	if err != nil {
		return err
	}
	q := url.Values{}
	if *status != "" {
		q.Set("status", *status)
	}
	if *tenant != "" {
		q.Set("tenant", *tenant)
	}
	uri := "/debug/leases"
	if len(q) > 0 {
		uri += "?" + q.Encode()
	}
	return showDebug(c, uri, asJSON, func(page leasesPage) error {
		t := newTable(c.out, "LEASE", "TENANT", "STATUS", "AGE", "FAILS", "BUDGET", "SERVICES", "PORTS")
		for _, l := range page.Leases {
			t.row(l.LeaseUUID, l.Tenant, l.Status, ageSeconds(l.AgeSeconds), strconv.Itoa(l.FailCount),
				budget(l.TerminalBudget), itemsSummary(l.Items), hostPorts(l.Services))
		}
		return t.flush()
	})
}

// hostPorts is every published port of a lease as "32768->8080/tcp", by
// service, instance and container port; an instance of a multi-instance
// lease is named, "web/1:32769->8080/tcp", so the ports can be told apart.
func hostPorts(services []messages.DebugService) string {
	services = append([]messages.DebugService(nil), services...)
	sort.SliceStable(services, func(i, j int) bool { return services[i].Name < services[j].Name })
	total := 0
	for _, s := range services {
		total += len(s.Instances)
	}
	var parts []string
	for _, s := range services {
		instances := append([]messages.DebugInstance(nil), s.Instances...)
		sort.SliceStable(instances, func(i, j int) bool { return instances[i].Index < instances[j].Index })
		for _, in := range instances {
			for _, p := range portList(in.Ports) {
				if total > 1 {
					p = fmt.Sprintf("%s/%d:%s", s.Name, in.Index, p)
				}
				parts = append(parts, p)
			}
		}
	}
	return strings.Join(parts, ",")
}
