package main

import (
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
// /version, /info), over plain HTTP on docker_host. berthctl does not link the
// Docker SDK: dockerio/engine is the only package that does, and doctor only
// needs three GETs.
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
	tr := &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: 10 * time.Second}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, d.host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case err == nil && resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	case err == nil && v != nil:
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		return fmt.Errorf("GET %s on %s: %w", path, d.host, err)
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
