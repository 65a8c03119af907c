package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/dockerio"
)

// checkFredV013: Docker holds nothing of berthd's backend name that fred
// v0.13's docker backend made (dockerio.MadeByFredV013) — the objects
// berthd's start guard refuses in production.
func checkFredV013(ctx context.Context, env *doctorEnv) checkResult {
	const name = "fred_v013"
	if env.docker == nil || env.info == nil {
		return notChecked(name)
	}
	ctx, cancel := context.WithTimeout(ctx, dockerTimeout)
	defer cancel()
	all, err := fredV013Objects(ctx, env.docker, env.cfg.Name)
	if err != nil {
		return warn(name, "not checked: "+err.Error(), "")
	}
	var adopted *dockerio.Adopted
	if env.store != nil {
		rec, err := takeover.LoadRecord(env.store)
		if err != nil {
			return warn(name, "not checked: "+err.Error(), "")
		}
		if rec != nil {
			adopted = &rec.Allowed
		}
	}
	objs := adopted.Unadopted(all, env.cfg.Name)
	if len(objs) == 0 {
		return ok(name, fmt.Sprintf("Docker holds nothing fred v0.13 made under backend %q that berthd has not adopted (%d adopted)",
			env.cfg.Name, len(all)))
	}
	return fail(name, dockerio.DescribeFredObjects(objs, env.cfg.Name),
		"this host runs fred's leases, which berthd does not know (production_mode refuses to start): take the host over "+
			"(berthd -preflight-storage-identity-adoption, README), keep fred's docker backend running, or close its leases first")
}

// fredV013Objects lists fred v0.13's containers and networks of backend.
func fredV013Objects(ctx context.Context, d *dockerAPI, backend string) ([]dockerio.FredObject, error) {
	f, _ := json.Marshal(map[string][]string{"label": {dockerio.LabelManaged + "=true", dockerio.LabelBackend + "=" + backend}})
	var cs []struct {
		ID     string            `json:"Id"`
		Names  []string          `json:"Names"`
		Labels map[string]string `json:"Labels"`
	}
	if err := d.get(ctx, "/containers/json?all=1&filters="+url.QueryEscape(string(f)), &cs); err != nil {
		return nil, err
	}
	var ns []struct {
		ID     string            `json:"Id"`
		Name   string            `json:"Name"`
		Labels map[string]string `json:"Labels"`
	}
	if err := d.get(ctx, "/networks?filters="+url.QueryEscape(string(f)), &ns); err != nil {
		return nil, err
	}
	var out []dockerio.FredObject
	for _, c := range cs {
		if dockerio.MadeByFredV013(c.Labels, backend) {
			name := c.ID
			if len(c.Names) > 0 {
				name = strings.TrimPrefix(c.Names[0], "/")
			}
			out = append(out, dockerio.FredObject{Kind: "container", ID: c.ID, Name: name, Lease: c.Labels[dockerio.LabelLease], Labels: c.Labels})
		}
	}
	for _, n := range ns {
		if dockerio.MadeByFredV013(n.Labels, backend) {
			out = append(out, dockerio.FredObject{Kind: "network", ID: n.ID, Name: n.Name, Labels: n.Labels})
		}
	}
	dockerio.SortFredObjects(out)
	return out, nil
}

// checkAdoption: a data dir a takeover made says what it adopted and whether
// the host can still go back to fred v0.13 (rollback_safe).
func checkAdoption(_ context.Context, env *doctorEnv) checkResult {
	const name = "adoption"
	if env.store == nil {
		return notChecked(name)
	}
	rec, err := takeover.LoadRecord(env.store)
	if err != nil {
		return fail(name, err.Error(), "")
	}
	if rec == nil {
		return ok(name, "this data dir was not made by a takeover")
	}
	rb, err := takeover.RollbackSafe(env.store, rec)
	if err != nil {
		return warn(name, "not checked: "+err.Error(), "")
	}
	what := fmt.Sprintf("adopted %d leases of %s backend %q at %s (fred's files in %s)", len(rec.Leases), rec.Source, rec.Backend,
		rec.AdoptedAt.Format(time.RFC3339), rec.FredDir)
	if rb.Note != "" {
		what += "; " + rb.Note
	}
	if rb.Safe {
		return ok(name, what+"; rollback_safe: true (stop berthd, remove its data dir, unmask and start fred)")
	}
	return warn(name, what+"; rollback_safe: false: "+strings.Join(rb.Why, "; "), "fix forward: fred v0.13 would take berthd's containers as its own and destroy their volumes")
}
