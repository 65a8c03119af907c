package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/messages"
)

// berthd under systemd (Type=notify, deploy/berthd.service) tells the service
// manager three things over $NOTIFY_SOCKET (sd_notify's datagram protocol):
// READY=1 once startup recovery has completed and /health would answer healthy,
// so `systemctl start` returns when berthd really serves; WATCHDOG=1 every
// WatchdogSec/2 while berthd's own actors answer the health ask (HealthVerdict.Live),
// so a wedged tree stops petting and systemd kills and restarts it, but an
// outage of Docker (or a bad store) leaves berthd up, unhealthy, and healthy
// again when it passes: a restart loop would fix neither; STOPPING=1 when the
// drain begins. Outside systemd ($NOTIFY_SOCKET unset) nothing is sent.
//
// The protocol is a few lines over a unixgram socket, written here rather than
// linked in: the environment comes from run's environ (tests pass their own),
// which go-systemd's os.Getenv-based helpers cannot take. Go's net package maps
// a leading '@' to the abstract namespace, as systemd means it.

// sdNotifier sends sd_notify datagrams.
type sdNotifier struct {
	socket   string        // $NOTIFY_SOCKET; "" = not under systemd
	watchdog time.Duration // WATCHDOG_USEC when meant for this process; 0 = no watchdog
}

// newSDNotifier reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from environ.
// A watchdog meant for another pid (WATCHDOG_PID set and not ours: a child that
// inherited the variables) is ignored, as sd_watchdog_enabled does.
func newSDNotifier(environ []string) *sdNotifier {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	n := &sdNotifier{socket: env["NOTIFY_SOCKET"]}
	if usec, err := strconv.ParseInt(env["WATCHDOG_USEC"], 10, 64); err == nil && usec > 0 {
		if pid := env["WATCHDOG_PID"]; pid == "" || pid == strconv.Itoa(os.Getpid()) {
			n.watchdog = time.Duration(usec) * time.Microsecond
		}
	}
	return n
}

// enabled reports whether a service manager listens.
func (n *sdNotifier) enabled() bool { return n.socket != "" }

// send delivers one state datagram ("READY=1", "WATCHDOG=1", …).
func (n *sdNotifier) send(state string) error {
	if !n.enabled() {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	return nil
}

// systemdSupervision runs the READY/WATCHDOG loop of one daemon and says
// STOPPING when its drain begins.
type systemdSupervision struct {
	n        *sdNotifier
	log      zerolog.Logger
	stopOnce sync.Once
	sendMu   sync.Mutex // orders a pet against STOPPING=1: nothing is sent after it
	stop     chan struct{}
	done     chan struct{}
}

// notReadyPoll is how often health is asked between recovery and READY (recovery
// completes before Docker may be confirmed reachable; READY waits for both).
const notReadyPoll = 250 * time.Millisecond

// superviseSystemd starts the loop (READY=1 once recovered and healthy, then the
// watchdog); check is /health's verdict. Without $NOTIFY_SOCKET it does nothing.
func superviseSystemd(n *sdNotifier, recovered <-chan struct{}, check func(context.Context) api.HealthVerdict, log zerolog.Logger) *systemdSupervision {
	s := &systemdSupervision{n: n, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if !n.enabled() {
		close(s.done)
		return s
	}
	go s.loop(recovered, check)
	return s
}

func (s *systemdSupervision) loop(recovered <-chan struct{}, check func(context.Context) api.HealthVerdict) {
	defer close(s.done)
	select {
	case <-recovered:
	case <-s.stop:
		return
	}
	// A health ask is bounded well inside the watchdog period, so a hung ask
	// cannot by itself make a pet late.
	askBudget := 10 * time.Second
	if s.n.watchdog > 0 {
		askBudget = min(askBudget, max(s.n.watchdog/4, time.Second))
	}
	ask := func() api.HealthVerdict {
		ctx, cancel := context.WithTimeout(context.Background(), askBudget)
		defer cancel()
		return check(ctx)
	}
	for {
		if ask().Healthy() {
			break
		}
		select {
		case <-s.stop:
			return
		case <-time.After(notReadyPoll):
		}
	}
	if !s.sendUnlessStopped("READY=1") {
		return
	}
	s.log.Info().Msg("systemd: READY=1 (recovered and healthy)")
	if s.n.watchdog <= 0 {
		<-s.stop
		return
	}
	tick := time.NewTicker(s.n.watchdog / 2)
	defer tick.Stop()
	last := api.HealthVerdict{}
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		v := ask()
		if v.Live() && !s.sendUnlessStopped("WATCHDOG=1") {
			return
		}
		s.logChange(last, v)
		last = v
	}
}

// logChange logs once per change whether the watchdog is petted and why not
// healthy.
func (s *systemdSupervision) logChange(last, v api.HealthVerdict) {
	switch {
	case !v.Live() && last.Live():
		s.log.Error().Str("reason", v.Reason).Dur("watchdog", s.n.watchdog).
			Msg("systemd: berthd's actors do not answer; not petting the watchdog (systemd restarts berthd if they stay so)")
	case v.Live() && !v.Healthy() && (!last.Live() || last.Reason != v.Reason):
		s.log.Warn().Str("reason", v.Reason).
			Msg("systemd: /health is unhealthy but berthd is live; still petting the watchdog")
	case v.Healthy() && !last.Healthy():
		s.log.Warn().Msg("systemd: healthy again")
	}
}

// sendUnlessStopped sends state unless STOPPING=1 went out; false when it did.
func (s *systemdSupervision) sendUnlessStopped(state string) bool {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	select {
	case <-s.stop:
		return false
	default:
	}
	if err := s.n.send(state); err != nil {
		s.log.Warn().Err(err).Str("state", state).Msg("systemd: notification not sent")
	}
	return true
}

// stopping ends the loop and sends STOPPING=1: the drain has begun. It does not
// wait for a health ask in flight (the loop sends nothing once stopped). Safe on
// a nil supervision and more than once.
func (s *systemdSupervision) stopping() {
	if s == nil {
		return
	}
	s.stopOnce.Do(func() {
		s.sendMu.Lock()
		defer s.sendMu.Unlock()
		close(s.stop)
		if err := s.n.send("STOPPING=1"); err != nil {
			s.log.Warn().Err(err).Msg("systemd: STOPPING=1 not sent")
		}
	})
}

// healthCheck is health with diagnostics.db's probe bound now: the drain clears
// d.diag while an ask may still be in flight.
func (d *daemon) healthCheck() func(context.Context) api.HealthVerdict {
	diagnostics := d.diag.Check
	return func(ctx context.Context) api.HealthVerdict { return d.health(ctx, diagnostics) }
}

// health is /health's verdict, asked in-process (an HTTP probe of our own
// listener could not pass an mTLS listener), within ctx; diagnostics probes
// diagnostics.db.
func (d *daemon) health(ctx context.Context, diagnostics func() error) api.HealthVerdict {
	// The facade, spawned last, may not listen yet when the actors already
	// answer healthy: systemd is told ready only once the API accepts a TCP
	// connection (asked until it first does: a TLS listener would log every
	// bare connect as a failed handshake).
	if d.apiAddr != "" && !d.accepting.Load() {
		dialer := net.Dialer{Timeout: time.Second}
		conn, err := dialer.DialContext(ctx, "tcp", d.apiAddr)
		if err != nil {
			return api.HealthVerdict{Reason: "the API listener does not accept yet"}
		}
		_ = conn.Close()
		d.accepting.Store(true)
	}
	ask := 10 * time.Second
	if deadline, ok := ctx.Deadline(); ok {
		ask = max(time.Until(deadline)-time.Second, 500*time.Millisecond)
	}
	return api.CheckHealth(ctx, d.tree, messages.Registry, messages.Watcher, diagnostics, d.proveVolumeRoot, ask)
}
