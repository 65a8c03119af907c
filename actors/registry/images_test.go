package registry

import (
	"fmt"
	"slices"
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// imageRequest is a one-instance request of lease id, of tenant, running image.
func imageRequest(id, tenant, image string) messages.ProvisionRequest {
	req := leaseRequest(id, "docker-small", 1)
	req.Tenant = tenant
	req.Payload = b64(`{"image":"` + image + `","ports":{"8080/tcp":{}}}`)
	return req
}

func admitImage(id, tenant, image string) *messages.Admit {
	return &messages.Admit{Req: imageRequest(id, tenant, image), Reply: make(chan error, 1)}
}

const (
	imgA = "127.0.0.1:5000/berth/a:1"
	imgB = "127.0.0.1:5000/berth/b:1"
	imgC = "127.0.0.1:5000/berth/c:1"
)

func TestDecide_AdmitImagePinBudgets(t *testing.T) {
	budgets := func(total, tenant int) func(*Settings) {
		return func(s *Settings) { s.ImagePins, s.TenantImagePins = total, tenant }
	}
	// Lease B of tenant t1 pins imgA; a retention record of t1 pins imgB.
	pinned := func(d *Directory) {
		putRequest(d, imageRequest(lB, "t1", imgA), Reported, lease.Ready)
		d.St.Retentions["dddddddd-dddd-4ddd-8ddd-dddddddddddd"] = &Retention{Status: RetentionActive, Record: messages.RetentionRecord{
			Lease: "dddddddd-dddd-4ddd-8ddd-dddddddddddd", Tenant: "t1", Images: []messages.ServicePin{{Service: "app", ImagePin: messages.ImagePin{Ref: imgB, ID: "sha256:b"}}}}}
	}
	tenantRefused := "answer insufficient resources: image pin budget exceeded: tenant t1 pins 2 distinct images and this request adds 1 (at most 2 per tenant); close leases or let retained data expire"
	runRows(t, []row{
		{name: "within the tenant's budget: admitted", mutate: budgets(0, 3),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t1", imgC) },
			want:  []string{"queue A#2 replacing=false", "reserve A 100m"}},
		{name: "a new image beyond the tenant's budget: refused, nothing reserved", mutate: budgets(0, 2),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t1", imgC) }, want: []string{tenantRefused}},
		{name: "an image the tenant already pins: reused above the ceiling", mutate: budgets(0, 2),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t1", imgB) },
			want:  []string{"queue A#2 replacing=false", "reserve A 100m"}},
		{name: "another tenant's pins are not this tenant's", mutate: budgets(0, 2),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t2", imgC) },
			want:  []string{"queue A#2 replacing=false", "reserve A 100m"}},
		{name: "the provider's budget: refused", mutate: budgets(2, 0),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t2", imgC) },
			want:  []string{"answer insufficient resources: image pin budget exceeded: the provider pins 2 distinct images and this request adds 1 (at most 2)"}},
		{name: "an admission queued in the batch counts", mutate: budgets(0, 3),
			setup: func(d *Directory) any { pinned(d); return admitImage(lA, "t1", imgC) },
			env:   Env{Queued: []admission{{spec: mustPrepare(imageRequest(lC, "t1", "127.0.0.1:5000/berth/q:1"))}}},
			want:  []string{tenantRefused[:len("answer insufficient resources: image pin budget exceeded: tenant t1 pins ")] + "3 distinct images and this request adds 1 (at most 3 per tenant); close leases or let retained data expire"}},
	})
}

func mustPrepare(req messages.ProvisionRequest) *lease.Spec {
	spec, err := dirOf().set.prepare(req, now)
	if err != nil {
		panic(err)
	}
	return spec
}

func TestImagePins_DerivedFromReportsAndRetentions_UnknownUntilReported(t *testing.T) {
	d := dirOf()
	putRequest(d, imageRequest(lB, "t1", imgA), Reported, lease.Ready)
	d.entries[lB].report.Images = []string{"sha256:a1", "sha256:a0"}
	putRequest(d, imageRequest(lC, "t1", imgC), Admitted, "") // not reported yet
	d.St.Retentions["dddddddd-dddd-4ddd-8ddd-dddddddddddd"] = &Retention{Status: RetentionActive, Record: messages.RetentionRecord{
		Tenant: "t1", Images: []messages.ServicePin{{Service: "app", ImagePin: messages.ImagePin{Ref: imgB, ID: "sha256:b"}}}}}
	p := d.imagePins()
	var ids []string
	for id := range p.IDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"sha256:a0", "sha256:a1", "sha256:b"}) || p.Unknown != 1 || !p.Ready {
		t.Fatalf("pins = %v unknown %d ready %v", ids, p.Unknown, p.Ready)
	}
	// A lease whose journal could not be read reports unknown: its pins are not known.
	d.entries[lB].report.Info.Status = messages.StatusUnknown
	if p := d.imagePins(); p.Unknown != 2 {
		t.Fatalf("unknown = %d, want the unreadable lease counted too", p.Unknown)
	}
}

// BenchmarkCheckImagePins_10kLeases: the budget check an admission runs with
// 10,000 live leases of 100 tenants, within the budgets (the common case: a
// count, no set built) and with the tenant near its budget (sets built).
func BenchmarkCheckImagePins_10kLeases(b *testing.B) {
	d := dirOf()
	for i := 0; i < 10_000; i++ {
		spec := mustPrepare(imageRequest(uuidN(i), fmt.Sprintf("t%d", i%100), fmt.Sprintf("127.0.0.1:5000/berth/i%d:1", i)))
		d.St.Leases[spec.Lease] = spec
	}
	refs := []string{"127.0.0.1:5000/berth/new:1"}
	d.set.ImagePins, d.set.TenantImagePins = DefaultImagePins, DefaultTenantImagePins
	b.Run("within", func(b *testing.B) {
		for b.Loop() {
			if err := d.checkImagePins(lA, "t1", refs, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	d.set.TenantImagePins = 100
	b.Run("near_the_tenant_budget", func(b *testing.B) {
		for b.Loop() {
			if err := d.checkImagePins(lA, "t1", refs, nil); err == nil {
				b.Fatal("admitted past the budget")
			}
		}
	})
}

func uuidN(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", i) }
