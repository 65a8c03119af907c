package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	retentionA = `{"lease_uuid":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c","tenant":"tenant-a","status":"active","retained_at":"2025-03-01T10:00:00Z","retained_until":"2025-03-08T10:00:00Z","disk_mb":1024,"used_bytes":5242880}`
	retentionB = `{"lease_uuid":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","tenant":"tenant-b","status":"reaping","retained_at":"2025-03-01T11:00:00Z","retained_until":"0001-01-01T00:00:00Z","disk_mb":512,"used_bytes":100,"extra":true}`
)

func TestRetentions_FollowsEveryPage(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/retentions?limit=500", `{"retentions":[`+retentionA+`],"continue":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c"}`)
	f.on("/retentions?continue=0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c&limit=500", `{"retentions":[`+retentionB+`]}`)
	got, err := f.run("retentions")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, ""+
		"LEASE                                 TENANT    STATUS   RETAINED AT           RETAINED UNTIL        DISK MB  USED\n"+
		"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c  tenant-a  active   2025-03-01T10:00:00Z  2025-03-08T10:00:00Z  1024     5.0 MiB\n"+
		"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10  tenant-b  reaping  2025-03-01T11:00:00Z  until evicted         512      100 B\n")

	got, err = f.run("retentions", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Retentions []map[string]any `json:"retentions"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil || len(doc.Retentions) != 2 || doc.Retentions[1]["extra"] != true {
		t.Fatalf("both pages, as sent: %v\n%s", err, got)
	}
}

func TestRetentions_NoneIsAnEmptyList(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/retentions", `{"retentions":[]}`)
	got, err := f.run("retentions", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, got, "{\n  \"retentions\": []\n}\n")
}

func TestRetentions_ACursorThatDoesNotMoveIsAnError(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/retentions?limit=500", `{"retentions":[`+retentionB+`],"continue":"6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10"}`)
	f.on("/retentions?continue=6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10&limit=500", `{"retentions":[],"continue":"0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c"}`)
	if _, err := f.run("retentions"); err == nil || !strings.Contains(err.Error(), "does not move") {
		t.Fatalf("a cursor going back: %v", err)
	}
}

func TestRetentions_IsSigned(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/retentions", `{"retentions":[]}`)
	t.Setenv("BERTH_CALLBACK_SECRET", strings.Repeat("y", 64))
	if _, err := f.run("retentions"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a wrong secret: %v", err)
	}
}
