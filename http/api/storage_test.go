package api_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/messages"
)

const foreignStorage = "7d3f0c2a-1b4e-4f6a-9c8d-0e1f2a3b4c5d"

func restartBody(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(messages.MaintenanceRequest{LeaseUUID: lease, CallbackURL: "http://127.0.0.1:9100/cb?operation_id=o"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStorageBinding_BerthdsOwnIdentityRunsTheRequestAsUnbound(t *testing.T) {
	e := newEnv(t)
	for _, uri := range []string{"/restart", "/_fred/storage/" + storageID + "/restart", "/restart?backend_storage_id=" + storageID,
		"/_fred/storage/" + storageID + "/restart?backend_storage_id=" + storageID} {
		r := e.do(http.MethodPost, uri, restartBody(t), "")
		if r.status != http.StatusAccepted || r.header.Get(api.StorageHeader) != storageID {
			t.Errorf("POST %s: %d %s, %s %q; want 202 naming %s", uri, r.status, r.body, api.StorageHeader, r.header.Get(api.StorageHeader), storageID)
		}
	}
	if n := len(e.s.maintains()); n != 4 {
		t.Errorf("the registry was asked %d times, want 4", n)
	}
	// Reads too: the bound form of a lease path and of a query route.
	for _, uri := range []string{"/_fred/storage/" + storageID + "/releases/" + lease, "/_fred/storage/" + storageID + "/provisions?limit=5&backend_storage_id=" + storageID} {
		if r := e.do(http.MethodGet, uri, nil, ""); r.status != http.StatusOK || r.header.Get(api.StorageHeader) != storageID {
			t.Errorf("GET %s: %d %s, want 200 naming the storage", uri, r.status, r.body)
		}
	}
}

func TestStorageBinding_AnotherIdentityIsRefused421BeforeAnythingChanges(t *testing.T) {
	e := newEnv(t)
	for _, uri := range []string{
		"/_fred/storage/" + foreignStorage + "/restart",
		"/restart?backend_storage_id=" + foreignStorage,
		"/restart?backend_storage_id=",                                                       // bound to nothing: not berthd
		"/restart?backend_storage_id=" + storageID + "&backend_storage_id=" + foreignStorage, // one of two
		"/_fred/storage/" + storageID + "/restart?backend_storage_id=" + foreignStorage,      // path and query disagree
		"/_fred/storage/not-a-uuid/restart",
	} {
		r := e.do(http.MethodPost, uri, restartBody(t), "")
		if r.status != http.StatusMisdirectedRequest || r.json(t)["code"] != "storage_identity_mismatch" || r.header.Get(api.StorageHeader) != storageID {
			t.Errorf("POST %s: %d %s (%s %q), want 421 storage_identity_mismatch naming %s", uri, r.status, r.body, api.StorageHeader, r.header.Get(api.StorageHeader), storageID)
		}
	}
	if got := e.s.maintains(); len(got) != 0 {
		t.Fatalf("a refused request reached the registry: %+v", got)
	}
}

func TestStorageBinding_SignatureIsCheckedFirstAndStillNamesTheStorage(t *testing.T) {
	e := newEnv(t)
	for _, sig := range []string{"-", "t=1,sha256=00"} {
		r := e.do(http.MethodPost, "/_fred/storage/"+foreignStorage+"/restart", restartBody(t), sig)
		if r.status != http.StatusUnauthorized || r.header.Get(api.StorageHeader) != storageID {
			t.Errorf("signature %q: %d %s, want 401 naming the storage", sig, r.status, r.body)
		}
	}
	// Unprotected routes answer as before, bound or not.
	if r := e.do(http.MethodGet, "/_fred/storage/"+storageID+"/health", nil, "-"); r.status != http.StatusNotFound {
		t.Errorf("GET the bound form of /health: %d, want 404 (only protected routes have one)", r.status)
	}
}

func TestStorageBinding_AnUnverifiableIdentityRefusesEveryProtectedRequest503(t *testing.T) {
	e := newEnv(t)
	e.s.set(func(s *script) { s.storage = errors.New("storage identity drift: marker gone") })
	for _, uri := range []string{"/restart", "/_fred/storage/" + storageID + "/restart"} {
		r := e.do(http.MethodPost, uri, restartBody(t), "")
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("POST %s: %d %s, want 503 with Retry-After", uri, r.status, r.body)
		}
	}
	if got := e.s.maintains(); len(got) != 0 {
		t.Fatalf("a request was let through an unverified storage identity: %+v", got)
	}
}
