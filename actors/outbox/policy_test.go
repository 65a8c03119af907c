package outbox_test

import (
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
)

// standIn is a listener standing in for berthd's own debug listener: bound on
// every interface (v4 and v6), it counts every connection that reaches it.
type standIn struct {
	ln       net.Listener
	port     int
	accepted atomic.Int64
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &standIn{ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return s
}

// settingsFor are fastSettings with DefaultSettings' client for the policy of a
// berthd whose debug listener is 127.0.0.1:<the stand-in's port>.
func settingsFor(self *standIn) outbox.Settings {
	s := fastSettings()
	s.Client = outbox.DefaultSettings(secret, callback.Policy{Self: []string{"127.0.0.1:" + strconv.Itoa(self.port)}}).Client
	s.Sweep = longSweep
	return s
}

// Measured before the policy: a callback_url pointing at the debug listener's
// chaos endpoint crashed the registry each time the callback was attempted.
func TestDelivery_ToOwnDebugPort_NeverConnects(t *testing.T) {
	self := newStandIn(t)
	set := settingsFor(self)
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	hosts := []string{"127.0.0.1", "localhost", "[::1]", "0.0.0.0", "127.0.0.2"}
	var rows []persistence.OutboxRow
	for i, h := range hosts {
		rows = append(rows, persistence.OutboxRow{
			Lease:      fmt.Sprintf("lease-%d", i),
			DeliveryID: uuid.NewString(),
			URL:        fmt.Sprintf("http://%s:%d/debug/chaos/crash?actor=root/registry", h, self.port),
			Body:       []byte(`{"lease_uuid":"x","status":"success","backend_storage_id":"s"}`),
			Kind:       "operation",
		})
	}
	d.commit(rows...)
	d.wake("")
	want := float64(len(hosts) * len(set.Delays))
	eventually(t, "every attempt of every row to finish", func() bool {
		return d.attempts(outbox.OutcomeRefused)+d.attempts(outbox.OutcomeTransport)+d.attempts(outbox.OutcomeRejected)+
			d.attempts(outbox.OutcomeDelivered) >= want
	})
	if n := self.accepted.Load(); n != 0 {
		t.Fatalf("berthd's own listener accepted %d connections from callback deliveries", n)
	}
	if got := d.attempts(outbox.OutcomeRefused); got != want {
		t.Errorf("refused attempts = %v, want %v (every attempt of every row, on the usual schedule)", got, want)
	}
	if d.pending() != len(hosts) {
		t.Errorf("pending = %d, want %d: a refused row is kept for the sweep like any undelivered one", d.pending(), len(hosts))
	}
}

// The same policy does not get in the way of an ordinary loopback receiver.
func TestDelivery_ToLoopbackReceiverOnAnotherPort_IsDelivered(t *testing.T) {
	self := newStandIn(t)
	rec := newReceiver(t) // 127.0.0.1, another port
	d := startDaemon(t, t.TempDir(), settingsFor(self), daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	d.wake("lease-a")
	eventually(t, "the row delivered", func() bool { return d.pending() == 0 })
	if got := rec.accepted("lease-a"); len(got) != 1 || got[0] != row.DeliveryID {
		t.Fatalf("receiver accepted %v, want [%s]", got, row.DeliveryID)
	}
	if n := d.attempts(outbox.OutcomeRefused); n != 0 {
		t.Errorf("refused attempts = %v, want 0", n)
	}
}

// The control run for the test above: without the policy the stand-in is
// reachable over every one of those hosts, so "accepted nothing" means something.
func TestStandIn_IsReachableWithoutThePolicy(t *testing.T) {
	self := newStandIn(t)
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]", "0.0.0.0"} {
		c, err := net.Dial("tcp", net.JoinHostPort(trimBrackets(h), strconv.Itoa(self.port)))
		if err != nil {
			t.Fatalf("dial %s: %v", h, err)
		}
		_ = c.Close()
	}
	eventually(t, "four connections accepted", func() bool { return self.accepted.Load() == 4 })
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' {
		return h[1 : len(h)-1]
	}
	return h
}
