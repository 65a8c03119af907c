package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/messages"
)

// A newer providerd binds its requests to the storage identity it saw; berthd
// runs them when the identity is its own, refuses any other before anything
// changes, names its identity on every protected answer, and stops answering
// once its identity no longer verifies.
func TestStorageBinding_BoundRequestsRunOnlyOnThisStorage_DriftRefusesAndStops(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	defer dc.Close()
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startChild(true)
	r := d.get("/provisions")
	own := r.Header.Get(api.StorageHeader)
	if r.Status != http.StatusOK || own == "" {
		t.Fatalf("GET /provisions: %d %s, %s %q", r.Status, r.Body, api.StorageHeader, own)
	}
	bound := "/_fred/storage/" + own
	foreign := uuid.NewString()

	provisionAt := func(uri, lease string) response {
		raw, _ := json.Marshal(flatManifest(nil))
		return d.postJSON(uri, messages.ProvisionRequest{LeaseUUID: lease, Tenant: "tenant-test", ProviderUUID: "provider-test",
			Items: []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}, CallbackURL: cb.callbackURL(),
			Payload: base64.StdEncoding.EncodeToString(raw)})
	}
	refusedLease := uuid.NewString()
	for _, uri := range []string{"/_fred/storage/" + foreign + "/provision", "/provision?backend_storage_id=" + foreign} {
		r := provisionAt(uri, refusedLease)
		if r.Status != http.StatusMisdirectedRequest || r.Header.Get(api.StorageHeader) != own {
			t.Fatalf("POST %s: %d %s, want 421 naming %s", uri, r.Status, r.Body, own)
		}
	}

	lease := uuid.NewString()
	if r := provisionAt(bound+"/provision?backend_storage_id="+own, lease); r.Status != http.StatusAccepted || r.Header.Get(api.StorageHeader) != own {
		t.Fatalf("bound provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)
	if got[0].Body.Status != messages.CallbackSuccess || got[0].Body.BackendStorageID != own {
		t.Fatalf("the bound lease's callback: %+v, want success from storage %s", got[0].Body, own)
	}
	if r := d.get(bound + "/info/" + lease); r.Status != http.StatusOK || r.Header.Get(api.StorageHeader) != own {
		t.Fatalf("bound GET /info: %d %s", r.Status, r.Body)
	}
	// The refused provisions changed nothing: no lease, no container, no callback.
	if r := d.get("/provisions/" + refusedLease); r.Status != http.StatusNotFound {
		t.Fatalf("the refused lease: %d %s, want 404", r.Status, r.Body)
	}
	if n := len(leaseContainers(t, dc, refusedLease)); n != 0 || len(cb.forLease(refusedLease)) != 0 {
		t.Fatalf("the refused lease has %d containers and %d callbacks", n, len(cb.forLease(refusedLease)))
	}
	// A bound close elsewhere is refused too; the lease keeps running.
	if r := d.postJSON("/_fred/storage/"+foreign+"/deprovision", messages.DeprovisionRequest{LeaseUUID: lease}); r.Status != http.StatusMisdirectedRequest {
		t.Fatalf("a close bound to another storage: %d %s", r.Status, r.Body)
	}
	d.waitStatus(lease, messages.StatusReady, 10*time.Second)
	if r := d.postJSON(bound+"/deprovision", messages.DeprovisionRequest{LeaseUUID: lease}); r.Status != http.StatusOK {
		t.Fatalf("bound close: %d %s", r.Status, r.Body)
	}
	d.deprovisionUntilGone(lease)

	// The data dir's identity changes under the process (another installation's
	// marker): the next protected request is refused before it does anything, and
	// berthd stops rather than act for a storage it no longer is.
	other := newDaemonDir(t).startInProcess()
	other.stop()
	foreignMarker, err := os.ReadFile(filepath.Join(other.dir, "data", "storage-identity"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "data", "storage-identity"), foreignMarker, 0o600); err != nil {
		t.Fatal(err)
	}
	late := uuid.NewString()
	if r := provisionAt("/provision", late); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a provision after the identity drifted: %d %s, want 503", r.Status, r.Body)
	}
	if code := d.waitExit(time.Minute); code == 0 {
		t.Fatalf("berthd exited %d after its storage identity drifted, want non-zero", code)
	}
	if n := len(leaseContainers(t, dc, late)); n != 0 {
		t.Fatalf("the provision refused for drift left %d containers", n)
	}
}
