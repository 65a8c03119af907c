package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/berth-dev/berth/cmd/berthd/config"
)

// daemonConfig is berthd's own configuration, read with -config FILE the way
// berthd reads it (embedded defaults, the file, BERTH_* overrides), so berthctl
// talks to the daemon that file describes without repeating its addresses and
// secrets on the command line.
type daemonConfig struct {
	cfg *config.Config
}

// loadDaemonConfig loads berthd's config file with the environment's overrides.
// An invalid file is reported with every problem, as berthd would.
func loadDaemonConfig(path string, environ []string) (*daemonConfig, error) {
	cfg, err := config.Load(path, environ)
	if err != nil {
		var p *config.Problems
		if errors.As(err, &p) {
			hint := ""
			if strings.Contains(strings.Join(p.List, "\n"), "callback_secret") {
				// The unit passes secrets as BERTH_* variables (EnvironmentFile=); this shell has none.
				hint = "\n(berthd gets its secrets from its environment: load the unit's EnvironmentFile here too, e.g. ( set -a && . /etc/berth/berthd.env && exec berthctl -config " + path + " … ))"
			}
			return nil, fmt.Errorf("-config %s is not a valid berthd configuration:\n  %s%s", path, strings.Join(p.List, "\n  "), hint)
		}
		return nil, fmt.Errorf("-config %s: %w", path, err)
	}
	return &daemonConfig{cfg: cfg}, nil
}

// applyTo sets the global flags the command line left alone from the config:
// -api (listen_addr; https when TLS is configured), -debug (debug_listen_addr),
// and -debug-token (debug.token) unless BERTH_DEBUG_TOKEN is set. An explicit
// flag always wins.
func (d *daemonConfig) applyTo(global *flag.FlagSet) error {
	set := map[string]bool{}
	global.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["api"] {
		scheme := "http"
		if d.cfg.TLSCertFile != "" {
			scheme = "https"
		}
		if err := global.Set("api", scheme+"://"+dialAddr(d.cfg.ListenAddr)); err != nil {
			return err
		}
	}
	if !set["debug"] && d.cfg.DebugListenAddr != "" {
		// The debug listener is plain HTTP whatever the API does (see actors/facade).
		if err := global.Set("debug", "http://"+dialAddr(d.cfg.DebugListenAddr)); err != nil {
			return err
		}
	}
	if !set["debug-token"] && os.Getenv("BERTH_DEBUG_TOKEN") == "" && d.cfg.Debug.Token != "" {
		if err := global.Set("debug-token", string(d.cfg.Debug.Token)); err != nil {
			return err
		}
	}
	return nil
}

// secret is the callback secret the daemon signs with: callback_secret, else the
// one berthd generated in <data_dir>/callback-secret (never created here).
func (d *daemonConfig) secret() ([]byte, error) {
	s, _, err := config.ExistingCallbackSecret(d.cfg)
	if err != nil {
		return nil, fmt.Errorf("callback secret from -config %s: %w", d.cfg.File, err)
	}
	return s, nil
}

// resolveSecret picks the signing secret: BERTH_CALLBACK_SECRET or an explicit
// -secret-file first, then the config's, then the default -secret-file.
func resolveSecret(global *flag.FlagSet, d *daemonConfig, secretFile string) ([]byte, error) {
	explicit := false
	global.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "secret-file" })
	if d != nil && !explicit && os.Getenv("BERTH_CALLBACK_SECRET") == "" {
		return d.secret()
	}
	return loadSecret(secretFile)
}

// dialAddr is where a client on this host reaches a listener bound to addr: a
// wildcard or empty host becomes the loopback address of its family.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
