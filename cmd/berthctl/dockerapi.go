package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// dockerAPI is the little of the Docker Engine API that doctor reads (/_ping,
// /version, /info, the installations' objects) and prune-installations removes,
// over plain HTTP on docker_host. berthctl does not link the Docker SDK:
// dockerio/engine is the only package that does, and these need a few calls.
type dockerAPI struct {
	host   string // docker_host as configured
	base   string // http://docker or http://host:port
	client *http.Client
}

// dockerVersion is the part of GET /version doctor reports.
type dockerVersion struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
}

// dockerInfo is the part of GET /info doctor judges.
type dockerInfo struct {
	SystemTime          string `json:"SystemTime"`
	DefaultAddressPools []struct {
		Base string `json:"Base"`
		Size int    `json:"Size"`
	} `json:"DefaultAddressPools"`
}

// newDockerAPI speaks to docker_host: unix:///path or tcp://host:port (plain
// HTTP, as berthd's engine does with the same setting); "" is $DOCKER_HOST, else
// the default socket, as the SDK's FromEnv.
func newDockerAPI(host string) (*dockerAPI, error) {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("docker_host %q: %w", host, err)
	}
	// Callers bound their calls with a context; this only catches a hung engine
	// (a network create on a busy one can take well over 10 s).
	tr := &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: time.Minute}
	d := &dockerAPI{host: host, client: &http.Client{Transport: tr}}
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		}
		d.base = "http://docker"
	case "tcp", "http":
		d.base = "http://" + u.Host
	default:
		return nil, fmt.Errorf("docker_host %q: doctor speaks unix:// and tcp:// only", host)
	}
	return d, nil
}

// get decodes GET path into v within ctx.
func (d *dockerAPI) get(ctx context.Context, path string, v any) error {
	return d.do(ctx, http.MethodGet, path, nil, v)
}

// do sends method path (with a JSON body when in is not nil) and decodes a 2xx
// answer into out when out is not nil.
func (d *dockerAPI) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, d.host, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	switch {
	case err == nil && resp.StatusCode/100 != 2:
		err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(raw)))
	case err == nil && out != nil:
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, d.host, err)
	}
	return nil
}

// apiAtLeast compares Docker API versions "major.minor".
func apiAtLeast(have, want string) bool {
	var hm, hn, wm, wn int
	if _, err := fmt.Sscanf(have, "%d.%d", &hm, &hn); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(want, "%d.%d", &wm, &wn); err != nil {
		return false
	}
	return hm > wm || (hm == wm && hn >= wn)
}
