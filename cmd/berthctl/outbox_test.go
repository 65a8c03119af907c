package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestOutbox_OneRowPerLeaseAndTheTotal(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/outbox", `{"total_queued":3,"leases":[
 {"lease_uuid":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c","queued":2,"oldest_at":"2025-03-01T10:00:00Z","oldest_age_seconds":125.9,"attempts":3,
  "last_error":"callback answered 500","kinds":{"operation":1,"lifecycle":1}},
 {"lease_uuid":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","queued":1,"oldest_at":"2025-03-01T10:00:00Z","oldest_age_seconds":2,"attempts":0,
  "kinds":{"maintenance":1}}]}`)
	got, err := f.run("outbox")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, ""+
		"LEASE                                 QUEUED  OLDEST  ATTEMPTS  KINDS                    LAST ERROR\n"+
		"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c  2       2m5s    3         lifecycle:1,operation:1  callback answered 500\n"+
		"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10  1       2s      0         maintenance:1            -\n"+
		"total queued: 3 (2 leases)\n")

	f.on("/debug/outbox", `{"total_queued":0,"leases":[]}`)
	got, err = f.run("outbox")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, "total queued: 0 (0 leases)\n")
}

func TestOutbox_RemovedUndeliveredListedAndCounted(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/outbox", `{"total_queued":0,"leases":[],"expired":1,"coalesced":2,"dropped":[
 {"lease_uuid":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c","delivery_id":"d1","kind":"lifecycle","status":"failed","reason":"expired",
  "created_at":"2025-03-01T10:00:00Z","dropped_at":"2025-03-02T10:00:00Z","attempts":3,"last_error":"callback answered 500"}]}`)
	got, err := f.run("outbox")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, ""+
		"total queued: 0 (0 leases)\n"+
		"\n"+
		"removed undelivered: 1 expired, 2 coalesced\n"+
		"LEASE                                 STATUS  REASON   CREATED               REMOVED               ATTEMPTS  LAST ERROR\n"+
		"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c  failed  expired  2025-03-01T10:00:00Z  2025-03-02T10:00:00Z  3         callback answered 500\n")
}

func TestDebugCommands_NeedNoSecretButSendTheToken(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/outbox", `{"total_queued":0,"leases":[]}`)
	t.Setenv("BERTH_CALLBACK_SECRET", "")
	var out bytes.Buffer
	err := run([]string{"-debug", f.debug.URL, "-debug-token", testDebugToken, "-secret-file", "/nonexistent/secret", "outbox"}, nil, &out)
	if err != nil {
		t.Fatalf("outbox without a secret file: %v", err)
	}
	err = run([]string{"-debug", f.debug.URL, "-debug-token", "wrong", "-secret-file", "/nonexistent/secret", "outbox"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid debug token") {
		t.Fatalf("a wrong debug token: %v, want the 401 and its body", err)
	}
}
