package main

import (
	"testing"
)

func TestTree_IndentsEachActorUnderItsParent(t *testing.T) {
	f := newFakeDaemon(t)
	f.on("/debug/actors", `{"path":"root","kind":"root","state":"","restarts":0,"mailbox_depth":0,"in_flight":0,"status":"ok","children":[
 {"path":"root/registry","kind":"registry","state":"2 leases","restarts":1,"mailbox_depth":3,"in_flight":0,"status":"ok","children":[
  {"path":"root/registry/lease-6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10","kind":"lease","state":"ready gen 1","restarts":0,"mailbox_depth":0,"in_flight":1,"status":"unresponsive"}]},
 {"path":"root/outbox","kind":"outbox","state":"0 queued","restarts":0,"mailbox_depth":0,"in_flight":0,"status":"ok"}]}`)
	got, err := f.run("tree")
	if err != nil {
		t.Fatal(err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0] != "/debug/actors?format=json" {
		t.Fatalf("requests %q", reqs)
	}
	wantText(t, got, ""+
		"ACTOR                                           KIND      STATUS        MAILBOX  RESTARTS  IN-FLIGHT  STATE\n"+
		"root                                            root      ok            0        0         0          -\n"+
		"  registry                                      registry  ok            3        1         0          2 leases\n"+
		"    lease-6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10  lease     unresponsive  0        0         1          ready gen 1\n"+
		"  outbox                                        outbox    ok            0        0         0          0 queued\n")

	got, err = f.run("tree", "-o", "json")
	if err != nil || got[:20] != "{\n  \"path\": \"root\",\n" {
		t.Fatalf("%v\n%s", err, got)
	}
}
