// Package facade is the actor that owns berthd's HTTP listeners: the API on
// listen_addr (optionally TLS / mTLS) and the debug listener. Handlers run on
// net/http's goroutines and talk to actors only by asking with reply channels.
// Stopping the facade (first, when the tree drains) stops accepting requests and
// lets in-flight ones finish within ShutdownGrace.
package facade

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/supervisors"
)

// Settings of the facade. The connection limits apply to both listeners; a zero
// value means the Default* below.
type Settings struct {
	ListenAddr       string
	DebugListenAddr  string // "" = no debug listener
	TLSCertFile      string
	TLSKeyFile       string
	TLSClientCAFile  string
	TLSClientAllowed []string
	ShutdownGrace    time.Duration // 30 s

	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, on every route
	// (the HMAC middleware's body pace cuts slow bodies off much sooner on the
	// authenticated ones).
	ReadTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
}

// DefaultSettings are the facade's fixed settings: 30 s for in-flight requests
// when it stops, 10 s to read a request's headers (the rest: the Default* limits).
func DefaultSettings() Settings {
	return Settings{ShutdownGrace: 30 * time.Second, ReadHeaderTimeout: 10 * time.Second}
}

// Defaults of the connection limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
)

// server builds an http.Server for h with the limits applied.
func (s *Settings) server(h http.Handler, tlsConf *tls.Config) *http.Server {
	pick := func(v, def time.Duration) time.Duration {
		if v <= 0 {
			return def
		}
		return v
	}
	maxHeader := s.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: pick(s.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       pick(s.ReadTimeout, DefaultReadTimeout),
		IdleTimeout:       pick(s.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeader,
	}
}

// Deps are the facade's collaborators.
type Deps struct {
	Tree     *supervisors.Tree
	API      http.Handler
	Debug    http.Handler
	Settings *Settings
	Log      zerolog.Logger
}

// Actor owns the listeners for its lifetime; a restart closes and reopens them.
type Actor struct {
	deps    *Deps
	set     *Settings
	log     zerolog.Logger
	servers []*http.Server
	addrs   []string
}

// New returns the producer of the facade.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{deps: deps, set: deps.Settings, log: deps.Log.With().Str("actor", "facade").Logger()}
	}
}

// Receive starts and stops the listeners with the actor.
func (a *Actor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		if err := a.start(); err != nil {
			a.shutdown()
			a.deps.Tree.Fail(fmt.Errorf("facade: %w", err))
		}
	case *actor.Restarting, *actor.Stopping:
		a.shutdown()
	}
}

// Describe summarises the facade for /debug/actors.
func (a *Actor) Describe() (string, int) {
	return fmt.Sprintf("serving %v", a.addrs), 0
}

func (a *Actor) start() error {
	tlsConf, err := a.tlsConfig()
	if err != nil {
		return err
	}
	if err := a.listen(a.set.ListenAddr, a.deps.API, tlsConf, false); err != nil {
		return fmt.Errorf("api listener: %w", err)
	}
	if a.set.DebugListenAddr != "" {
		// Debug requests are read-only and some are long-lived (the event stream):
		// they end when the listener shuts down instead of holding the drain up.
		if err := a.listen(a.set.DebugListenAddr, a.deps.Debug, nil, true); err != nil {
			return fmt.Errorf("debug listener: %w", err)
		}
	}
	return nil
}

// listen serves h on addr. With cancelOnShutdown every request's context is
// canceled as soon as Shutdown begins; otherwise in-flight requests finish within
// ShutdownGrace.
func (a *Actor) listen(addr string, h http.Handler, tlsConf *tls.Config, cancelOnShutdown bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := a.set.server(h, tlsConf)
	if cancelOnShutdown {
		base, cancel := context.WithCancel(context.Background())
		srv.BaseContext = func(net.Listener) context.Context { return base }
		srv.RegisterOnShutdown(cancel)
	}
	a.servers = append(a.servers, srv)
	a.addrs = append(a.addrs, ln.Addr().String())
	a.log.Info().Str("addr", ln.Addr().String()).Bool("tls", tlsConf != nil).Msg("listening")
	go func() {
		var err error
		if tlsConf != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.deps.Tree.Fail(fmt.Errorf("facade: serve %s: %w", addr, err))
		}
	}()
	return nil
}

// shutdown stops accepting and waits for in-flight requests (bounded).
func (a *Actor) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), a.set.ShutdownGrace)
	defer cancel()
	for _, s := range a.servers {
		if err := s.Shutdown(ctx); err != nil {
			_ = s.Close()
		}
	}
	a.servers, a.addrs = nil, nil
}

func (a *Actor) tlsConfig() (*tls.Config, error) {
	if a.set.TLSCertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(a.set.TLSCertFile, a.set.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if a.set.TLSClientCAFile == "" {
		return conf, nil
	}
	pem, err := os.ReadFile(a.set.TLSClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("read client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA file holds no certificate")
	}
	conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	if allowed := a.set.TLSClientAllowed; len(allowed) > 0 {
		conf.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			for _, chain := range chains {
				if len(chain) == 0 {
					continue
				}
				leaf := chain[0]
				if slices.Contains(allowed, leaf.Subject.CommonName) {
					return nil
				}
				for _, dns := range leaf.DNSNames {
					if slices.Contains(allowed, dns) {
						return nil
					}
				}
			}
			return fmt.Errorf("client certificate not in tls_client_allowed_names")
		}
	}
	return conf, nil
}
