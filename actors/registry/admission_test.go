package registry

import (
	"encoding/base64"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
)

const testImage = "127.0.0.1:5000/berth/workload:test"

var refusalKinds = []error{messages.ErrBadRequest, messages.ErrInvalidManifest, messages.ErrUnknownSKU,
	messages.ErrImageNotAllowed, messages.ErrAlreadyProvisioned, messages.ErrInvalidState, messages.ErrNotFound,
	messages.ErrInsufficientResources, messages.ErrLifecyclePending, messages.ErrBusy, messages.ErrUnavailable}

// assertRefusal checks err is a *messages.Refusal of exactly kind whose message
// mentions want.
func assertRefusal(t *testing.T, err error, kind error, want string) {
	t.Helper()
	var r *messages.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v (%T), want a *messages.Refusal of %v", err, err, kind)
	}
	for _, k := range refusalKinds {
		if errors.Is(err, k) != (k == kind) {
			t.Fatalf("refusal %q: kind %v, want exactly %v", r.Msg, r.Kind, kind)
		}
	}
	if !strings.Contains(r.Msg, want) {
		t.Fatalf("refusal %q does not mention %q", r.Msg, want)
	}
}

func admissionSettings() *Settings {
	return &Settings{
		Totals:     Resources{CPUMilli: 8000, MemoryMB: 16384, DiskMB: 65536},
		SKUMapping: map[string]string{"chain-sku-1": "docker-small", "ghost": "no-such-profile", "docker-small": "docker-large"},
		SKUProfiles: map[string]lease.Profile{
			"docker-small":    {CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024},
			"docker-large":    {CPUCores: 2, MemoryMB: 4096, DiskMB: 8192},
			"docker-diskless": {CPUCores: 0.25, MemoryMB: 256},
		},
		ScratchMB:         64,
		AllowedRegistries: []string{"127.0.0.1:5000"},
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// validRequest is a flat one-instance request that prepare accepts.
func validRequest() messages.ProvisionRequest {
	return messages.ProvisionRequest{
		LeaseUUID:    uuid.NewString(),
		Tenant:       "fred1tenantqz8k3v7xw5m2n4p6r9s0t",
		ProviderUUID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
		Items:        []messages.LeaseItem{{SKU: "chain-sku-1", Quantity: 2}},
		CallbackURL:  "https://providerd.example:8443/v1/callbacks?operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f&attempt=2",
		Payload:      b64(`{"image":"` + testImage + `"}`),
	}
}

func TestPrepare_ValidRequest_BuildsFrozenSpec(t *testing.T) {
	s := admissionSettings()
	req := validRequest()
	now := time.Date(2031, 5, 6, 7, 8, 9, 10, time.FixedZone("X", 3600))
	spec, err := s.prepare(req, now)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if spec.Lease != req.LeaseUUID || spec.Tenant != req.Tenant || spec.ProviderUUID != req.ProviderUUID {
		t.Fatalf("identity fields not copied: %+v", spec)
	}
	if spec.Admission != 0 {
		t.Fatalf("prepare must not number the admission, got %d", spec.Admission)
	}
	if !spec.AdmittedAt.Equal(now) || spec.AdmittedAt.Location() != time.UTC {
		t.Fatalf("AdmittedAt = %v, want %v in UTC", spec.AdmittedAt, now)
	}
	if !spec.Flat || spec.CallbackURL != req.CallbackURL || spec.OperationID != "3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f" {
		t.Fatalf("flat/callback/operation: %+v", spec)
	}
	wantItems := []messages.LeaseItem{{SKU: "chain-sku-1", Quantity: 2, ServiceName: "app"}}
	if !reflect.DeepEqual(spec.Items, wantItems) {
		t.Fatalf("items = %+v, want normalised %+v", spec.Items, wantItems)
	}
	if len(spec.Services) != 1 {
		t.Fatalf("services = %+v", spec.Services)
	}
	svc := spec.Services[0]
	if svc.Name != "app" || svc.SKU != "chain-sku-1" || svc.Quantity != 2 || svc.Manifest == nil || svc.Manifest.Image != testImage {
		t.Fatalf("service = %+v", svc)
	}
	if svc.Profile != (lease.Profile{CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024}) {
		t.Fatalf("profile = %+v, want docker-small through sku_mapping", svc.Profile)
	}
	if got := Need(spec); got != (Resources{CPUMilli: 1000, MemoryMB: 1024, DiskMB: 2048}) {
		t.Fatalf("Need = %+v", got)
	}
	if spec.Instances() != 2 {
		t.Fatalf("instances = %d", spec.Instances())
	}

	// The profile is frozen by value: a later edit of sku_profiles does not reprice it.
	s.SKUProfiles["docker-small"] = lease.Profile{CPUCores: 9, MemoryMB: 9, DiskMB: 9}
	if spec.Services[0].Profile.CPUCores != 0.5 {
		t.Fatalf("spec follows a later settings edit: %+v", spec.Services[0].Profile)
	}
}

func TestPrepare_LeaseUUIDMustBeCanonical(t *testing.T) {
	id := uuid.NewString()
	for _, bad := range []string{
		"", strings.ToUpper(id), strings.ReplaceAll(id, "-", ""), "{" + id + "}", "urn:uuid:" + id,
		" " + id, id + "\n", id[:35], id + "0", "g" + id[1:],
	} {
		req := validRequest()
		req.LeaseUUID = bad
		spec, err := admissionSettings().prepare(req, time.Now())
		if spec != nil {
			t.Errorf("lease_uuid %q accepted", bad)
			continue
		}
		assertRefusal(t, err, messages.ErrBadRequest, "lease_uuid")
	}
	if !messages.ValidLeaseID(id) {
		t.Fatalf("a lowercase hyphenated UUID must be valid: %s", id)
	}
}

func TestPrepare_CallbackURLRules(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string // "" = accepted, else a word the refusal mentions
	}{
		{"https://providerd.example:8443/v1/cb?operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f", ""},
		{"http://10.1.2.3/cb", ""},
		{"http://localhost/cb", ""},
		{"http://[::1]:9000/cb", ""},
		{"HTTPS://providerd.example/cb", ""},
		{"", "required"},
		{"ftp://providerd.example/cb", "http(s)"},
		{"providerd.example/cb", "http(s)"},
		{"//providerd.example/cb", "http(s)"},
		{"http://", "http(s)"},
		{"https:///cb", "http(s)"},
		{"http://:8080/cb", "http(s)"},
		{"http://user:pw@providerd.example/cb", "http(s)"},
		{"http://%zz/", "http(s)"},
		{"http://169.254.169.254/latest/meta-data", "link-local"},
		{"http://169.254.0.1:8080/", "link-local"},
		{"http://[fe80::1]/cb", "link-local"},
		{"http://[::ffff:169.254.1.1]/cb", "link-local"},
		{"http://224.0.0.251/cb", "link-local"},
		{"http://[ff02::1]/cb", "link-local"},
		{"https://providerd.example/" + strings.Repeat("a", maxFieldLen), "too long"},
	} {
		for _, field := range []string{"callback_url", "lifecycle_callback_url"} {
			req := validRequest()
			if field == "callback_url" {
				req.CallbackURL = tc.url
			} else {
				if tc.url == "" {
					continue // an absent lifecycle URL is derived, not refused
				}
				req.LifecycleCallbackURL = tc.url
			}
			spec, err := admissionSettings().prepare(req, time.Now())
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s %q refused: %v", field, tc.url, err)
				}
				continue
			}
			if spec != nil || err == nil {
				t.Errorf("%s %q accepted", field, tc.url)
				continue
			}
			assertRefusal(t, err, messages.ErrBadRequest, field)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %q refused with %q, want it to mention %q", field, tc.url, err, tc.want)
			}
		}
	}
	// Exactly the length limit is fine.
	req := validRequest()
	base := "https://providerd.example/"
	req.CallbackURL = base + strings.Repeat("a", maxFieldLen-len(base))
	if _, err := admissionSettings().prepare(req, time.Now()); err != nil {
		t.Fatalf("a callback URL of exactly %d bytes refused: %v", maxFieldLen, err)
	}
}

// The seed: a completion URL's operation_id is exactly one canonical UUIDv4
// (it names the operation in the journal and in Fred), refused with 400 before
// anything is admitted; a tokenless URL stays accepted for fred v0.13's client.
func TestPrepare_OperationIDIsOneCanonicalUUIDv4(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f", ""},
		{"attempt=1", ""}, // tokenless
		{"operation_id=x", "UUIDv4"},
		{"operation_id=3F2B8C1E-9D4A-4E6B-8F7C-1A2B3C4D5E6F", "UUIDv4"},
		{"operation_id=3f2b8c1e-9d4a-1e6b-8f7c-1a2b3c4d5e6f", "UUIDv4"},
		{"operation_id=3f2b8c1e-9d4a-4e6b-cf7c-1a2b3c4d5e6f", "UUIDv4"},
		{"operation_id=", "UUIDv4"},
		{"operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f&operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f", "exactly one"},
		{"operation%5Fid=x", "UUIDv4"}, // escaped key: still the token
	} {
		req := validRequestWith(func(r *messages.ProvisionRequest) { r.CallbackURL = "https://providerd.example/cb?" + tc.query })
		spec, err := admissionSettings().prepare(req, time.Now())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.query, err)
		case tc.want != "" && (spec != nil || err == nil):
			t.Errorf("%s accepted", tc.query)
		case tc.want != "":
			assertRefusal(t, err, messages.ErrBadRequest, tc.want)
		}
	}
}

// A zone-scoped IPv6 literal is link-local by definition; net.ParseIP does not parse
// the zone, so the check must not be skipped for it.
func TestPrepare_CallbackURL_ZonedLinkLocalIPv6Refused(t *testing.T) {
	req := validRequest()
	req.CallbackURL = "http://[fe80::1%25eth0]:8080/cb?operation_id=3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f"
	spec, err := admissionSettings().prepare(req, time.Now())
	if spec != nil || err == nil {
		t.Fatalf("callback_url %q (link-local with a zone) accepted", req.CallbackURL)
	}
	assertRefusal(t, err, messages.ErrBadRequest, "link-local")
}

func TestPrepare_LifecycleURL_DerivedFromOperationID(t *testing.T) {
	req := validRequest()
	req.CallbackURL = "https://providerd.example:8443/v1/callbacks/provision?tenant=a%20b&operation_id=5e6f7a8b-1c2d-4e3f-9a0b-c1d2e3f4a5b6&x=1&x=2"
	spec, err := admissionSettings().prepare(req, time.Now())
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if spec.CallbackURL != req.CallbackURL {
		t.Fatalf("callback URL rewritten: %q", spec.CallbackURL)
	}
	got, err := url.Parse(spec.LifecycleURL)
	if err != nil {
		t.Fatalf("derived lifecycle URL %q does not parse: %v", spec.LifecycleURL, err)
	}
	if got.Scheme != "https" || got.Host != "providerd.example:8443" || got.Path != "/v1/callbacks/provision" {
		t.Fatalf("derived URL %q changed scheme, host or path", spec.LifecycleURL)
	}
	want := url.Values{"lifecycle_id": {"5e6f7a8b-1c2d-4e3f-9a0b-c1d2e3f4a5b6"}, "tenant": {"a b"}, "x": {"1", "2"}}
	if !reflect.DeepEqual(got.Query(), want) {
		t.Fatalf("derived query = %v, want %v", got.Query(), want)
	}
	if spec.OperationID != "5e6f7a8b-1c2d-4e3f-9a0b-c1d2e3f4a5b6" {
		t.Fatalf("operation ID = %q, want op-42 from the callback URL", spec.OperationID)
	}

	// Without operation_id the callback URL is used as is, byte for byte.
	for _, cb := range []string{
		"https://providerd.example/v1/cb?b=2&a=1",
		"https://providerd.example/v1/cb",
		"http://10.0.0.7:9000/cb?lifecycle_id=already",
	} {
		req := validRequest()
		req.CallbackURL = cb
		spec, err := admissionSettings().prepare(req, time.Now())
		if err != nil {
			t.Fatalf("prepare %q: %v", cb, err)
		}
		if spec.LifecycleURL != cb {
			t.Errorf("lifecycle URL of %q = %q, want it unchanged", cb, spec.LifecycleURL)
		}
		if callback.LifecycleURL(cb) != cb {
			t.Errorf("callback.LifecycleURL(%q) = %q", cb, callback.LifecycleURL(cb))
		}
		// Without an operation_id the operation gets a fresh UUID of its own.
		if _, err := uuid.Parse(spec.OperationID); err != nil || spec.OperationID == "" {
			t.Errorf("operation ID %q is not a fresh UUID", spec.OperationID)
		}
	}
	a, _ := admissionSettings().prepare(validRequestWith(func(r *messages.ProvisionRequest) { r.CallbackURL = "https://p.example/cb" }), time.Now())
	b, _ := admissionSettings().prepare(validRequestWith(func(r *messages.ProvisionRequest) { r.CallbackURL = "https://p.example/cb" }), time.Now())
	if a.OperationID == b.OperationID {
		t.Fatalf("two operations without operation_id share the ID %q", a.OperationID)
	}

	// An explicit lifecycle URL wins and is kept verbatim.
	req = validRequest()
	req.LifecycleCallbackURL = "https://providerd.example/v1/lifecycle?lease=z&operation_id=keep"
	spec, err = admissionSettings().prepare(req, time.Now())
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if spec.LifecycleURL != req.LifecycleCallbackURL || spec.OperationID != "3f2b8c1e-9d4a-4e6b-8f7c-1a2b3c4d5e6f" {
		t.Fatalf("explicit lifecycle URL: got %q (operation %q)", spec.LifecycleURL, spec.OperationID)
	}
}

func validRequestWith(mut func(*messages.ProvisionRequest)) messages.ProvisionRequest {
	r := validRequest()
	mut(&r)
	return r
}

func TestPrepare_SKUResolution(t *testing.T) {
	for _, tc := range []struct {
		sku     string
		profile lease.Profile
	}{
		{"chain-sku-1", lease.Profile{CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024}},       // mapping → profile
		{"docker-large", lease.Profile{CPUCores: 2, MemoryMB: 4096, DiskMB: 8192}},       // a profile name directly
		{"docker-small", lease.Profile{CPUCores: 2, MemoryMB: 4096, DiskMB: 8192}},       // mapping first, even over a same-named profile
		{"docker-diskless", lease.Profile{CPUCores: 0.25, MemoryMB: 256, ScratchMB: 64}}, // diskless pins scratch
	} {
		req := validRequestWith(func(r *messages.ProvisionRequest) { r.Items[0].SKU = tc.sku })
		spec, err := admissionSettings().prepare(req, time.Now())
		if err != nil {
			t.Errorf("sku %q refused: %v", tc.sku, err)
			continue
		}
		if got := spec.Services[0]; got.Profile != tc.profile || got.SKU != tc.sku {
			t.Errorf("sku %q → %+v (sku %q), want %+v", tc.sku, got.Profile, got.SKU, tc.profile)
		}
	}
	for _, sku := range []string{"ghost", "docker-tiny", "", strings.Repeat("x", 100)} {
		req := validRequestWith(func(r *messages.ProvisionRequest) { r.Items[0].SKU = sku })
		spec, err := admissionSettings().prepare(req, time.Now())
		if spec != nil {
			t.Errorf("sku %q accepted", sku)
			continue
		}
		assertRefusal(t, err, messages.ErrUnknownSKU, "unknown sku")
		if len(err.Error()) > 200 {
			t.Errorf("refusal for a long sku is not bounded: %d bytes", len(err.Error()))
		}
	}
}

func TestPrepare_DisklessProfilePinsScratch_WithoutTouchingSettings(t *testing.T) {
	s := admissionSettings()
	req := validRequestWith(func(r *messages.ProvisionRequest) { r.Items[0].SKU = "docker-diskless"; r.Items[0].Quantity = 3 })
	spec, err := s.prepare(req, time.Now())
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if got := spec.Services[0].Profile; got.ScratchMB != 64 || got.DiskMB != 0 || got.EffectiveDiskMB() != 64 {
		t.Fatalf("diskless profile = %+v, want scratch 64 pinned", got)
	}
	if got := Need(spec); got != (Resources{CPUMilli: 750, MemoryMB: 768, DiskMB: 192}) {
		t.Fatalf("Need = %+v, want 3 × (0.25, 256, 64 scratch)", got)
	}
	if s.SKUProfiles["docker-diskless"].ScratchMB != 0 {
		t.Fatalf("prepare wrote into the configured profile: %+v", s.SKUProfiles["docker-diskless"])
	}
	// The pinned scratch is frozen: a later container_tmpfs_size_mb does not change it.
	s.ScratchMB = 4096
	if spec.Services[0].Profile.ScratchMB != 64 {
		t.Fatalf("spec follows a later ScratchMB edit")
	}
	// A profile with disk takes no scratch.
	req = validRequestWith(func(r *messages.ProvisionRequest) { r.Items[0].SKU = "docker-large" })
	spec, err = s.prepare(req, time.Now())
	if err != nil || spec.Services[0].Profile.ScratchMB != 0 {
		t.Fatalf("disk profile: %+v, %v", spec, err)
	}
}

func TestPrepare_ServicesSortedByName(t *testing.T) {
	manifest := `{"services":{"zeta":{"image":"` + testImage + `"},"alpha":{"image":"` + testImage +
		`"},"mid":{"image":"` + testImage + `"}}}`
	req := validRequestWith(func(r *messages.ProvisionRequest) {
		r.Payload = b64(manifest)
		r.Items = []messages.LeaseItem{
			{SKU: "docker-large", Quantity: 1, ServiceName: "zeta"},
			{SKU: "chain-sku-1", Quantity: 2, ServiceName: "alpha"},
			{SKU: "docker-diskless", Quantity: 0, ServiceName: "mid"},
		}
	})
	spec, err := admissionSettings().prepare(req, time.Now())
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	var names []string
	for _, s := range spec.Services {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"alpha", "mid", "zeta"}) {
		t.Fatalf("services = %v, want sorted by name", names)
	}
	if spec.Flat {
		t.Fatalf("a stack manifest is not flat")
	}
	// Items keep the request's order; each service keeps its own item's SKU and quantity.
	if spec.Items[0].ServiceName != "zeta" || spec.Items[2].ServiceName != "mid" {
		t.Fatalf("items reordered: %+v", spec.Items)
	}
	if a := spec.Services[0]; a.SKU != "chain-sku-1" || a.Quantity != 2 || a.Profile.CPUCores != 0.5 {
		t.Fatalf("alpha = %+v", a)
	}
	if z := spec.Services[2]; z.SKU != "docker-large" || z.Quantity != 1 || z.Profile.CPUCores != 2 {
		t.Fatalf("zeta = %+v", z)
	}
	if spec.Instances() != 3 {
		t.Fatalf("instances = %d, want 3 (mid has quantity 0)", spec.Instances())
	}
}

func TestPrepare_EveryRefusalIsARefusalOfTheRightKind(t *testing.T) {
	long := strings.Repeat("t", maxFieldLen+1)
	for _, tc := range []struct {
		name string
		mut  func(*messages.ProvisionRequest)
		kind error
		want string
	}{
		{"non-canonical uuid", func(r *messages.ProvisionRequest) { r.LeaseUUID = "not-a-uuid" }, messages.ErrBadRequest, "lease_uuid"},
		{"tenant too long", func(r *messages.ProvisionRequest) { r.Tenant = long }, messages.ErrBadRequest, "too long"},
		{"provider too long", func(r *messages.ProvisionRequest) { r.ProviderUUID = long }, messages.ErrBadRequest, "too long"},
		{"no items", func(r *messages.ProvisionRequest) { r.Items = nil }, messages.ErrBadRequest, "items"},
		{"unnamed items", func(r *messages.ProvisionRequest) {
			r.Items = []messages.LeaseItem{{SKU: "docker-large", Quantity: 1}, {SKU: "docker-large", Quantity: 1}}
		}, messages.ErrBadRequest, "service_name"},
		{"negative quantity", func(r *messages.ProvisionRequest) { r.Items[0].Quantity = -1 }, messages.ErrBadRequest, "quantity"},
		{"no callback", func(r *messages.ProvisionRequest) { r.CallbackURL = "" }, messages.ErrBadRequest, "callback_url"},
		{"bad lifecycle", func(r *messages.ProvisionRequest) { r.LifecycleCallbackURL = "gopher://x" }, messages.ErrBadRequest, "lifecycle_callback_url"},
		{"no payload", func(r *messages.ProvisionRequest) { r.Payload = "" }, messages.ErrBadRequest, "payload"},
		{"payload not base64", func(r *messages.ProvisionRequest) { r.Payload = "!!!not base64!!!" }, messages.ErrInvalidManifest, "base64"},
		{"manifest not an object", func(r *messages.ProvisionRequest) { r.Payload = b64(`["x"]`) }, messages.ErrInvalidManifest, "object"},
		{"manifest without image", func(r *messages.ProvisionRequest) { r.Payload = b64(`{"env":{"A":"b"}}`) }, messages.ErrInvalidManifest, "image"},
		{"image registry not allowed", func(r *messages.ProvisionRequest) { r.Payload = b64(`{"image":"ghcr.io/x/y:1"}`) }, messages.ErrImageNotAllowed, "not allowed"},
		{"unknown sku", func(r *messages.ProvisionRequest) { r.Items[0].SKU = "docker-galactic" }, messages.ErrUnknownSKU, "docker-galactic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := admissionSettings().prepare(validRequestWith(tc.mut), time.Now())
			if spec != nil {
				t.Fatalf("accepted: %+v", spec)
			}
			assertRefusal(t, err, tc.kind, tc.want)
		})
	}
}
