package debug

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/berth-dev/berth/messages"
)

// The custom-domain DNS gate and a lease's names, for operators: GET
// /debug/domains lists the gates; GET /debug/leases/{lease} carries the lease's
// ingress (see messages/domaingate_read.go).

// domains is GET /debug/domains?lease=L: {"enabled", "gates": [DomainGateView…]},
// by lease then domain. Without a gate (ingress off) it is enabled false and no
// gates; a gate that does not answer is 503.
func (s *server) domains(w http.ResponseWriter, r *http.Request) {
	lease := r.URL.Query().Get("lease")
	if lease != "" && !messages.ValidLeaseID(lease) {
		writeError(w, messages.Refuse(messages.ErrBadRequest, "lease must be a canonical UUID"))
		return
	}
	out := messages.DomainsSummary{Enabled: s.opts.DomainGatePath != "", Gates: []messages.DomainGateView{}}
	if out.Enabled {
		gates, err := s.gatesOf(r.Context(), lease)
		if err != nil {
			writeError(w, err)
			return
		}
		out.Gates = gates
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) gatesOf(ctx context.Context, lease string) ([]messages.DomainGateView, error) {
	rep, err := ask(s, ctx, s.opts.DomainGatePath, func(c chan<- messages.DomainGatesReply) any {
		return &messages.DebugDomainGates{Lease: lease, Reply: c}
	})
	if err != nil {
		return nil, fmt.Errorf("ask the domain gate: %w", err)
	}
	if rep.Gates == nil {
		return []messages.DomainGateView{}, nil
	}
	return rep.Gates, nil
}

// leaseView is GET /debug/leases/{lease}: the history with the lease's ingress.
type leaseView struct {
	messages.LeaseHistory
	Ingress *messages.LeaseIngress `json:"ingress,omitempty"`
	// IngressError says why the ingress could not be read (the registry did
	// not answer); ingress is then absent.
	IngressError string `json:"ingress_error,omitempty"`
}

// ingressOf is a live lease's names and custom domains as its provision record
// says them (the running release's), each custom domain with its gate; nil
// when the registry has no record of the lease or it has neither, and why
// when the registry could not be asked.
func (s *server) ingressOf(ctx context.Context, id string) (*messages.LeaseIngress, string) {
	rep, err := ask(s, ctx, s.opts.RegistryPath, func(c chan<- messages.ProvisionReply) any {
		return &messages.GetProvision{Lease: id, Reply: c}
	})
	if err == nil {
		err = rep.Err
	}
	switch {
	case errors.Is(err, messages.ErrNotFound):
		return nil, ""
	case err != nil:
		return nil, "ask the registry: " + err.Error()
	}
	info := rep.Info
	if info == nil || info.Status == messages.StatusRetained {
		return nil, "" // closed: nothing runs under a name, no gate is held
	}
	asked := map[string]string{} // service → the custom domain its item asks for
	for _, it := range info.Items {
		if it.CustomDomain != "" {
			asked[it.ServiceName] = it.CustomDomain
		}
	}
	if len(info.FQDNs) == 0 && len(info.CustomDomains) == 0 && len(asked) == 0 {
		return nil, ""
	}
	out := &messages.LeaseIngress{}
	var gates []messages.DomainGateView
	if len(asked) > 0 && s.opts.DomainGatePath != "" {
		if gates, err = s.gatesOf(ctx, id); err != nil {
			out.GatesError = err.Error()
		}
	}
	names := map[string]bool{}
	for _, m := range []map[string]string{asked, info.CustomDomains} {
		for n := range m {
			names[n] = true
		}
	}
	for n := range info.FQDNs {
		names[n] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		svc := messages.ServiceIngress{Name: name, FQDNs: info.FQDNs[name], CustomDomain: asked[name], RoutedDomain: info.CustomDomains[name]}
		if svc.FQDNs == nil {
			svc.FQDNs = []string{}
		}
		if svc.CustomDomain != "" && out.GatesError == "" {
			svc.Gate = gateOf(id, gates, svc)
		}
		out.Services = append(out.Services, svc)
	}
	return out, ""
}

// gateOf is a service's custom-domain gate: the domaingate's view, or — when it
// holds none — forgotten once the domain is routed, else not watched.
func gateOf(lease string, gates []messages.DomainGateView, svc messages.ServiceIngress) *messages.DomainGateView {
	for _, g := range gates {
		if g.Domain == svc.CustomDomain {
			return &g
		}
	}
	g := messages.DomainGateView{LeaseUUID: lease, Domain: svc.CustomDomain, State: messages.GateNotWatched}
	if svc.RoutedDomain == svc.CustomDomain {
		g.State = messages.GateForgotten
	}
	return &g
}
