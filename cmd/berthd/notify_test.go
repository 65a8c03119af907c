package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/http/api"
)

// fakeSystemd is a NOTIFY_SOCKET listener recording every datagram with its arrival.
type fakeSystemd struct {
	addr string
	got  chan notification
}

type notification struct {
	state string
	at    time.Time
}

func newFakeSystemd(t *testing.T, addr string) *fakeSystemd {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeSystemd{addr: addr, got: make(chan notification, 1024)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.got <- notification{state: string(buf[:n]), at: time.Now()}
		}
	}()
	return f
}

// next waits for the next datagram.
func (f *fakeSystemd) next(t *testing.T, within time.Duration) notification {
	t.Helper()
	select {
	case n := <-f.got:
		return n
	case <-time.After(within):
		t.Fatalf("no sd_notify datagram within %s", within)
		return notification{}
	}
}

// quiet asserts nothing arrives for d.
func (f *fakeSystemd) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case n := <-f.got:
		t.Fatalf("unexpected %q", n.state)
	case <-time.After(d):
	}
}

func TestSDNotifier_ReadsItsEnvironment(t *testing.T) {
	t.Parallel()
	pid := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		env      []string
		socket   string
		watchdog time.Duration
	}{
		{nil, "", 0},
		{[]string{"NOTIFY_SOCKET=/run/systemd/notify"}, "/run/systemd/notify", 0},
		{[]string{"NOTIFY_SOCKET=@abstract", "WATCHDOG_USEC=30000000"}, "@abstract", 30 * time.Second},
		{[]string{"NOTIFY_SOCKET=/s", "WATCHDOG_USEC=30000000", "WATCHDOG_PID=" + pid}, "/s", 30 * time.Second},
		{[]string{"NOTIFY_SOCKET=/s", "WATCHDOG_USEC=30000000", "WATCHDOG_PID=1"}, "/s", 0}, // another process's watchdog
		{[]string{"NOTIFY_SOCKET=/s", "WATCHDOG_USEC=nonsense"}, "/s", 0},
	} {
		n := newSDNotifier(c.env)
		if n.socket != c.socket || n.watchdog != c.watchdog {
			t.Errorf("%v: socket %q watchdog %s; want %q %s", c.env, n.socket, n.watchdog, c.socket, c.watchdog)
		}
	}
	if err := newSDNotifier(nil).send("READY=1"); err != nil {
		t.Errorf("outside systemd a send is a no-op: %v", err)
	}
}

// The whole protocol against a fake systemd: nothing before recovery, READY=1
// only once recovered and healthy, WATCHDOG=1 every WatchdogSec/2 while berthd's
// actors answer (healthy, or unhealthy as in a Docker outage: a restart would
// not help), none while they do not (systemd would then restart the daemon),
// and STOPPING=1 as the last word.
func TestSystemdSupervision_ReadyAfterHealthy_WatchdogCadence_Stopping(t *testing.T) {
	// Sequential: asserts the watchdog cadence to 150 ms.
	for _, name := range []string{"path", "abstract"} {
		t.Run(name, func(t *testing.T) {
			addr := filepath.Join(t.TempDir(), "notify")
			if name == "abstract" {
				addr = "@berth-test-" + uuid.NewString()
			}
			sd := newFakeSystemd(t, addr)
			const watchdog = 400 * time.Millisecond
			n := newSDNotifier([]string{"NOTIFY_SOCKET=" + addr, fmt.Sprintf("WATCHDOG_USEC=%d", watchdog.Microseconds())})
			var healthy, dead atomic.Bool
			var asks atomic.Int64
			check := func(ctx context.Context) api.HealthVerdict {
				asks.Add(1)
				if _, ok := ctx.Deadline(); !ok {
					t.Error("a health ask without a deadline")
				}
				switch {
				case dead.Load():
					return api.HealthVerdict{Reason: "registry not answering", RegistryErr: context.DeadlineExceeded}
				case healthy.Load():
					return api.HealthVerdict{}
				}
				return api.HealthVerdict{Reason: "docker engine unreachable"}
			}
			pets := func(n int) {
				t.Helper()
				prev := time.Now()
				for i := 0; i < n; i++ {
					p := sd.next(t, watchdog)
					if gap := p.at.Sub(prev); p.state != "WATCHDOG=1" || gap > watchdog/2+150*time.Millisecond {
						t.Fatalf("pet %d: %q after %s, want WATCHDOG=1 every %s", i, p.state, gap, watchdog/2)
					}
					prev = p.at
				}
			}
			recovered := make(chan struct{})
			s := superviseSystemd(n, recovered, check, zerolog.Nop())

			sd.quiet(t, 300*time.Millisecond) // not recovered: not even a health ask
			if asks.Load() != 0 {
				t.Fatalf("%d health asks before recovery", asks.Load())
			}
			close(recovered)
			sd.quiet(t, 600*time.Millisecond) // recovered but unhealthy (Docker not confirmed yet)
			healthy.Store(true)
			ready := sd.next(t, 2*time.Second)
			if ready.state != "READY=1" {
				t.Fatalf("first datagram %q, want READY=1", ready.state)
			}
			prev := ready.at
			for i := 0; i < 4; i++ {
				p := sd.next(t, watchdog)
				gap := p.at.Sub(prev)
				if p.state != "WATCHDOG=1" || gap < watchdog/2-50*time.Millisecond || gap > watchdog/2+150*time.Millisecond {
					t.Fatalf("pet %d: %q after %s, want WATCHDOG=1 every %s", i, p.state, gap, watchdog/2)
				}
				prev = p.at
			}
			healthy.Store(false)
			pets(4) // unhealthy but live (Docker is out): still petted
			dead.Store(true)
			time.Sleep(watchdog / 2) // a pet may be on its way from the last live ask
			for len(sd.got) > 0 {
				<-sd.got
			}
			sd.quiet(t, watchdog) // the actors do not answer: no pets for longer than the watchdog
			dead.Store(false)
			healthy.Store(true)
			if p := sd.next(t, watchdog); p.state != "WATCHDOG=1" {
				t.Fatalf("live again: %q", p.state)
			}
			s.stopping()
			s.stopping() // idempotent
			for {
				p := sd.next(t, time.Second)
				if p.state == "STOPPING=1" {
					break
				}
				if p.state != "WATCHDOG=1" {
					t.Fatalf("before STOPPING=1: %q", p.state)
				}
			}
			select {
			case <-s.done:
			case <-time.After(2 * time.Second):
				t.Fatal("the loop did not end after STOPPING=1")
			}
			sd.quiet(t, watchdog) // nothing after STOPPING=1
		})
	}
}

func TestSystemdSupervision_OutsideSystemdDoesNothing(t *testing.T) {
	t.Parallel()
	called := atomic.Bool{}
	s := superviseSystemd(newSDNotifier(nil), make(chan struct{}), func(context.Context) api.HealthVerdict {
		called.Store(true)
		return api.HealthVerdict{}
	}, zerolog.Nop())
	s.stopping()
	var nilSupervision *systemdSupervision
	nilSupervision.stopping()
	if called.Load() {
		t.Fatal("health asked without a NOTIFY_SOCKET")
	}
}

// A real berthd under a fake systemd: READY=1 comes once /health answers
// healthy, the watchdog is petted at its cadence, and SIGTERM is answered with
// STOPPING=1 before a clean exit.
func TestDaemon_NotifiesSystemd_ReadyWatchdogStopping(t *testing.T) {
	// Sequential: asserts a watchdog pet within every 1 s of a real daemon.
	dockerClient(t)
	d := newDaemonDir(t)
	sd := newFakeSystemd(t, "@berth-test-"+uuid.NewString())
	const watchdog = time.Second
	environ := []string{"NOTIFY_SOCKET=" + sd.addr, fmt.Sprintf("WATCHDOG_USEC=%d", watchdog.Microseconds())}
	sigs, done := make(chan os.Signal, 1), make(chan int, 1)
	go func() { done <- run([]string{"-config", d.cfgPath}, environ, d.log, d.log, sigs) }()
	exited := false
	t.Cleanup(func() { // a test that failed half-way still stops its daemon
		if exited {
			return
		}
		select {
		case sigs <- os.Interrupt:
		default:
		}
		select {
		case <-done:
		case <-time.After(90 * time.Second):
		}
	})
	ready := sd.next(t, 60*time.Second)
	if ready.state != "READY=1" {
		t.Fatalf("first datagram %q, want READY=1\n%s", ready.state, d.log.String())
	}
	if resp, err := http.Get("http://" + d.api + "/health"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("READY=1 sent but /health is not 200: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for i := 0; i < 2; i++ {
		if p := sd.next(t, watchdog); p.state != "WATCHDOG=1" {
			t.Fatalf("pet %d: %q", i, p.state)
		}
	}
	sigs <- os.Interrupt
	for {
		p := sd.next(t, 10*time.Second)
		if p.state == "STOPPING=1" {
			break
		}
		if p.state != "WATCHDOG=1" {
			t.Fatalf("before STOPPING=1: %q", p.state)
		}
	}
	select {
	case code := <-done:
		exited = true
		if code != exitOK {
			t.Fatalf("exit %d after SIGTERM\n%s", code, d.log.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("berthd did not stop\n%s", d.log.String())
	}
	sd.quiet(t, 200*time.Millisecond)
}
