package lease

// A launch's plan: the release's services as admitted, completed by the steps
// (steps/) — images admitted and the lease network found or made, the stateful
// instances' volumes, the writable paths — then launched by Compose.Up.

import (
	"context"
	"errors"
	"slices"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
)

// singleContainer reports whether r runs exactly one container (one service of
// quantity 1): only such a release may run on the default bridge, which has no
// DNS for a second container to find the first by.
func singleContainer(r Release) bool {
	return len(r.Services) == 1 && r.Services[0].Quantity == 1
}

// prepare plans the launch of r stamped l: the release's images admitted and
// the lease network found or made, at once (they are independent), the images'
// writable paths detected as soon as they are admitted; then the stateful
// instances' volumes (their mount points owned by the container's user) and the
// writable paths' seeds. A failure is returned as an Outcome with ok false:
// Failed for a definite one (not yet cleaned up), Canceled when ctx ended. A
// skipped step degrades the launch (j.degraded) instead.
func (j *job) prepare(ctx context.Context, r Release, l launch) (dockerio.Plan, Outcome, bool) {
	j.degraded = ""
	p := j.plan(&r, l)
	images, det, err := j.imagesAndNetwork(ctx, r, &p)
	if err != nil {
		return p, stepOutcome(ctx, err), false
	}
	found, err := det.Wait()
	if err != nil {
		return p, stepOutcome(ctx, err), false
	}
	done := j.provisionPhase("volumes")
	for i := range p.Services {
		sp := &p.Services[i]
		if err = j.volumes().Up(ctx, sp, images[sp.Name], found[sp.Name]); err != nil {
			break
		}
	}
	done()
	if err != nil {
		return p, stepOutcome(ctx, err), false
	}
	done = j.provisionPhase("seed")
	for i, svc := range r.Services {
		j.writable().Up(ctx, &p.Services[i], found[svc.Name], svc.Profile.ScratchMB)
	}
	done()
	return p, Outcome{}, true
}

// plan is the Compose launch of r stamped l as admitted; prepare adds what the
// host decided (images, network, volumes, writable paths).
func (j *job) plan(r *Release, l launch) dockerio.Plan {
	spec, set := j.spec, j.set
	p := dockerio.Plan{
		Lease:          spec.Lease,
		Tenant:         spec.Tenant,
		ProviderUUID:   spec.ProviderUUID,
		BackendName:    set.BackendName,
		InstallationID: set.InstallationID,
		OperationID:    l.OperationID,
		MaintenanceID:  l.MaintenanceID,
		Generation:     l.Generation,
		FailCount:      l.FailCount,
		CallbackURL:    spec.CallbackURL,
		LifecycleURL:   spec.LifecycleURL,
		Ingress:        set.Ingress,
		HostBindIP:     set.HostBindIP,
		ReadonlyRootfs: set.ReadonlyRootfs,
		PidsLimit:      set.PidsLimit,
		TmpfsSizeMB:    set.TmpfsSizeMB,
	}
	for _, svc := range r.Services {
		sp := dockerio.ServicePlan{Service: *svc.Manifest, Name: svc.Name, SKU: svc.SKU, Quantity: svc.Quantity,
			CPUCores: svc.Profile.CPUCores, MemoryMB: svc.Profile.MemoryMB, DiskMB: svc.Profile.DiskMB}
		if set.Ingress != nil {
			sp.CustomDomain, sp.FQDNs = r.Domains[svc.Name], spec.pinnedFQDNs(svc.Name, svc.Quantity)
		}
		p.Services = append(p.Services, sp)
	}
	return p
}

// imagesAndNetwork admits the images (into p) while the network is found or
// made (attached to p), and starts the writable-path detection as soon as the
// images are in.
func (j *job) imagesAndNetwork(ctx context.Context, r Release, p *dockerio.Plan) (map[string]dockerio.ImageInfo, *steps.Detection, error) {
	type netResult struct {
		net steps.Net
		err error
	}
	netDone := make(chan netResult, 1)
	go func() {
		done := j.provisionPhase("network")
		net, err := j.network().Up(ctx, j.launch.Generation == 1 && j.maint == nil, singleContainer(r))
		done()
		netDone <- netResult{net, err}
	}()
	done := j.provisionPhase("images")
	images, err := j.admitImages(ctx, r, p)
	done()
	if err != nil {
		<-netDone
		return nil, nil, err
	}
	det := j.writable().Detect(ctx, p, j.provisionPhase("detect"))
	net := <-netDone
	if net.err != nil {
		det.Abandon()
		return nil, nil, net.err
	}
	net.net.Attach(p)
	return images, det, nil
}

// admitImages admits every service image of r into p: the recorded content
// when the lease already ran this reference (never the tag again), else the
// registry's answer for the tag. It reports the pins to the actor, which
// journals them. The lease mount budget is decided as soon as the images'
// VOLUMEs are known, before the first helper (the images' users, then
// detection): an over-budget lease is refused before anything of it runs.
func (j *job) admitImages(ctx context.Context, r Release, p *dockerio.Plan) (map[string]dockerio.ImageInfo, error) {
	want := make([]steps.Image, 0, len(r.Services))
	for _, svc := range r.Services {
		w := steps.Image{Service: svc.Name, Ref: svc.Manifest.Image, Pin: j.pins[svc.Manifest.Image]}
		if pin, ok := r.Pin(svc.Name); ok && pin.Ref == w.Ref && pin.ID != "" {
			w.Pin = pin
		}
		want = append(want, w)
	}
	images, err := j.images().Admit(ctx, want)
	if err != nil {
		return nil, err
	}
	var pins []ServiceImage
	for _, w := range want {
		pins = append(pins, ServiceImage{Service: w.Service, ImagePin: images[w.Service].Pin(w.Ref)})
	}
	if j.report != nil && !slices.Equal(r.Images, pins) {
		j.report(Pinned{Version: r.Version, Images: pins})
	}
	for i := range p.Services {
		sp := &p.Services[i]
		img := images[sp.Name]
		sp.ImageID, sp.ImageVolumes, sp.MaskLabels = img.ID, img.Volumes, img.MaskLabels
	}
	if err := steps.MountBudget(*p); err != nil {
		j.log.Warn().Err(err).Msg("lease mount budget exceeded: refused before any helper ran")
		return nil, err
	}
	if err := j.images().Users(ctx, images); err != nil {
		return nil, err
	}
	return images, nil
}

// stepOutcome is how a step's error ends an attempt: canceled with ctx, else
// as failure says.
func stepOutcome(ctx context.Context, err error) Outcome {
	if ctx.Err() != nil {
		return canceled
	}
	return failure(err)
}

// failure is a step's error as an outcome: its definite failure (*steps.Failed),
// else pending (nothing definite: the resume settles it).
func failure(err error) Outcome {
	if f := (*steps.Failed)(nil); errors.As(err, &f) {
		return fail(f.Reason, f.Message)
	}
	return pending
}
