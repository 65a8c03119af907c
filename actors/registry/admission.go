package registry

import (
	"sort"
	"strings"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/messages/manifest"
)

// maxFieldLen bounds free-text request fields (tenant, provider, URLs).
const maxFieldLen = 2048

// checkCommonFields checks what provision and restore requests share — field
// lengths, items present, the callback URLs under the callback policy — and
// returns the lifecycle URL (given, or derived from callback_url).
func (s *Settings) checkCommonFields(tenant, provider string, items int, callbackURL, lifecycleURL string) (string, error) {
	if len(tenant) > maxFieldLen || len(provider) > maxFieldLen {
		return "", messages.Refuse(messages.ErrBadRequest, "tenant or provider_uuid too long")
	}
	if items == 0 {
		return "", messages.Refuse(messages.ErrBadRequest, "items must not be empty")
	}
	if err := s.Callbacks.CheckURLField("callback_url", callbackURL); err != nil {
		return "", err
	}
	if err := callback.CheckOperationID(callbackURL); err != nil {
		return "", err
	}
	if lifecycleURL == "" {
		return callback.LifecycleURL(callbackURL), nil
	}
	if err := s.Callbacks.CheckURLField("lifecycle_callback_url", lifecycleURL); err != nil {
		return "", err
	}
	return lifecycleURL, nil
}

// prepare validates a provision request and builds its frozen spec (without an
// admission number). It is pure: nothing is reserved or written. Every refusal is a
// *messages.Refusal, so the wire status follows from its kind.
func (s *Settings) prepare(req messages.ProvisionRequest, now time.Time) (*lease.Spec, error) {
	if !messages.ValidLeaseID(req.LeaseUUID) {
		return nil, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID")
	}
	lifecycle, err := s.checkCommonFields(req.Tenant, req.ProviderUUID, len(req.Items), req.CallbackURL, req.LifecycleCallbackURL)
	if err != nil {
		return nil, err
	}
	if req.Payload == "" {
		return nil, messages.Refuse(messages.ErrBadRequest, "payload is required")
	}
	items, err := manifest.NormalizeItems(req.Items)
	if err != nil {
		return nil, err
	}
	if items, err = s.checkCustomDomains(items); err != nil {
		return nil, err
	}
	raw, err := manifest.DecodePayload(req.Payload)
	if err != nil {
		return nil, err
	}
	built, err := manifest.Build(raw, items, manifest.Options{AllowedRegistries: s.AllowedRegistries})
	if err != nil {
		return nil, err
	}
	spec := &lease.Spec{
		Lease:        req.LeaseUUID,
		Tenant:       req.Tenant,
		ProviderUUID: req.ProviderUUID,
		Items:        built.Items,
		Flat:         built.Flat,
		Manifest:     raw,
		CallbackURL:  req.CallbackURL,
		LifecycleURL: lifecycle,
		OperationID:  callback.OperationID(req.CallbackURL),
		AdmittedAt:   now.UTC(),
	}
	for _, it := range built.Items {
		prof, ok := s.resolveSKU(it.SKU)
		if !ok {
			return nil, messages.Refuse(messages.ErrUnknownSKU, "unknown sku %q", excerpt(it.SKU))
		}
		spec.Services = append(spec.Services, lease.ServiceSpec{Name: it.ServiceName, SKU: it.SKU,
			Quantity: it.Quantity, Profile: prof, Manifest: built.Services[it.ServiceName]})
	}
	sort.Slice(spec.Services, func(i, j int) bool { return spec.Services[i].Name < spec.Services[j].Name })
	return spec, nil
}

// prepareUpdate validates an update's manifest against the lease as admitted: the
// provision rules, the lease's own items (so its service names), and the lease's
// frozen resource profiles — an update never reprices a lease.
func (s *Settings) prepareUpdate(spec *lease.Spec, payload string) (*lease.Release, error) {
	if payload == "" {
		return nil, messages.Refuse(messages.ErrBadRequest, "payload is required")
	}
	raw, err := manifest.DecodePayload(payload)
	if err != nil {
		return nil, err
	}
	built, err := manifest.Build(raw, spec.Items, manifest.Options{AllowedRegistries: s.AllowedRegistries})
	if err != nil {
		return nil, err
	}
	if len(built.Services) != len(spec.Services) {
		return nil, messages.Refuse(messages.ErrInvalidManifest, "manifest services must be the lease's")
	}
	target := &lease.Release{Manifest: raw, Items: built.Items}
	for _, svc := range spec.Services {
		m, ok := built.Services[svc.Name]
		if !ok {
			return nil, messages.Refuse(messages.ErrInvalidManifest, "manifest services must be the lease's (%s is missing)", svc.Name)
		}
		svc.Manifest = m
		target.Services = append(target.Services, svc)
	}
	return target, nil
}

// resolveSKU maps an on-chain SKU through sku_mapping, then sku_profiles, and pins
// the scratch allowance of a diskless profile.
func (s *Settings) resolveSKU(sku string) (lease.Profile, bool) {
	name := sku
	if mapped, ok := s.SKUMapping[sku]; ok {
		name = mapped
	}
	p, ok := s.SKUProfiles[name]
	if !ok {
		return lease.Profile{}, false
	}
	if p.DiskMB == 0 {
		p.ScratchMB = s.ScratchMB
	}
	return p, true
}

func excerpt(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
