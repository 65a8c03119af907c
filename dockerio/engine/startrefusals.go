package engine

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// startRefusals remembers the containers whose start the daemon answered with
// a final error (the seed's ContainerStartFailed: no tenant process ran). A
// container still "created" after a rejected launch without one was never
// started at all — Compose gave up on a dependency first — and is no definite
// failure. Entries expire: a launch is judged within minutes of its starts.
type startRefusals struct {
	mu sync.Mutex
	at map[string]time.Time // container ID (as the start request named it) → when refused
}

const startRefusalTTL = 10 * time.Minute

// record notes the start request's answer when it is a final error.
func (r *startRefusals) record(req *http.Request, status int) {
	if status < http.StatusBadRequest {
		return
	}
	id := containerOfStart(req.URL.Path)
	if id == "" {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	for k, t := range r.at {
		if now.Sub(t) > startRefusalTTL {
			delete(r.at, k)
		}
	}
	r.at[id] = now
}

// refused reports whether the daemon refused a start of the container id or name.
func (r *startRefusals) refused(id, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, byID := r.at[id]
	_, byName := r.at[name]
	return byID || byName
}

// containerOfStart is the {id} of /v1.xx/containers/{id}/start ("" otherwise).
func containerOfStart(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if n := len(parts); n >= 3 && parts[n-1] == "start" && parts[n-3] == "containers" {
		return parts[n-2]
	}
	return ""
}
