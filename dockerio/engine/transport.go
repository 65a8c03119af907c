package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"
	"github.com/prometheus/client_golang/prometheus"
)

// Ops of berth_docker_requests_total: a fixed vocabulary derived from method and
// path template, never a raw path (which would carry IDs and image names).
const (
	opContainerCreate     = "container_create"
	opContainerStart      = "container_start"
	opContainerInspect    = "container_inspect"
	opContainerList       = "container_list"
	opContainerStop       = "container_stop"
	opContainerRemove     = "container_remove"
	opContainerLogs       = "container_logs"
	opNetworkCreate       = "network_create"
	opNetworkInspect      = "network_inspect"
	opNetworkList         = "network_list"
	opNetworkRemove       = "network_remove"
	opImageInspect        = "image_inspect"
	opImagePull           = "image_pull"
	opDistributionInspect = "distribution_inspect"
	opVolumeCreate        = "volume_create"
	opVolumeInspect       = "volume_inspect"
	opVolumeList          = "volume_list"
	opVolumeRemove        = "volume_remove"
	opEvents              = "events"
	opPing                = "ping"
	opOther               = "other"
)

var allOps = []string{
	opContainerCreate, opContainerStart, opContainerInspect, opContainerList, opContainerStop, opContainerRemove,
	opContainerLogs, opNetworkCreate, opNetworkInspect, opNetworkList, opNetworkRemove, opImageInspect, opImagePull,
	opDistributionInspect, opVolumeCreate, opVolumeInspect, opVolumeList, opVolumeRemove, opEvents, opPing, opOther,
}

// defaultCallTimeout is container_create_timeout's and container_start_timeout's default.
const defaultCallTimeout = 30 * time.Second

// maxImageInspectBytes caps an image inspect answer before JSON decoding (seed:
// "caps each image-inspection response at 2 MiB"): image metadata is tenant input.
const maxImageInspectBytes = 2 << 20

// apiVersionPrefix is the "/v1.41" the SDK puts in front of every path.
var apiVersionPrefix = regexp.MustCompile(`^/v[0-9]+(\.[0-9]+)?/`)

// crudOps are the list, create, inspect and remove ops of the resources whose
// endpoints follow that one pattern.
var crudOps = map[string][]string{
	"networks": {opNetworkList, opNetworkCreate, opNetworkInspect, opNetworkRemove},
	"volumes":  {opVolumeList, opVolumeCreate, opVolumeInspect, opVolumeRemove},
}

// requestOp names a Docker API request by its method and path template.
func requestOp(method, urlPath string) string {
	p := urlPath
	if loc := apiVersionPrefix.FindStringIndex(p); loc != nil {
		p = p[loc[1]-1:]
	}
	seg := strings.Split(strings.Trim(p, "/"), "/")
	n := len(seg)
	switch {
	case p == "/_ping":
		return opPing
	case p == "/events" && method == http.MethodGet:
		return opEvents
	case seg[0] == "containers":
		switch {
		case n == 2 && seg[1] == "create" && method == http.MethodPost:
			return opContainerCreate
		case n == 2 && seg[1] == "json" && method == http.MethodGet:
			return opContainerList
		case n == 2 && method == http.MethodDelete:
			return opContainerRemove
		case n == 3 && method == http.MethodGet && seg[2] == "json":
			return opContainerInspect
		case n == 3 && method == http.MethodGet && seg[2] == "logs":
			return opContainerLogs
		case n == 3 && method == http.MethodPost && seg[2] == "start":
			return opContainerStart
		case n == 3 && method == http.MethodPost && seg[2] == "stop":
			return opContainerStop
		}
	case crudOps[seg[0]] != nil:
		ops := crudOps[seg[0]]
		switch {
		case n == 1 && method == http.MethodGet:
			return ops[0]
		case n == 2 && seg[1] == "create" && method == http.MethodPost:
			return ops[1]
		case n == 2 && method == http.MethodGet:
			return ops[2]
		case n == 2 && method == http.MethodDelete:
			return ops[3]
		}
	case seg[0] == "images":
		switch {
		case n == 2 && seg[1] == "create" && method == http.MethodPost:
			return opImagePull
		case n >= 3 && seg[n-1] == "json" && method == http.MethodGet: // names carry slashes
			return opImageInspect
		}
	case seg[0] == "distribution" && n >= 3 && seg[n-1] == "json" && method == http.MethodGet:
		return opDistributionInspect
	}
	return opOther
}

// newRequestCounter registers berth_docker_requests_total on reg (nil: counted,
// not registered). A second engine on the same registry shares the first's counter.
func newRequestCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c, err := registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_docker_requests_total",
		Help: "Docker Engine API requests berth sent (compose's included), by operation.",
	}, []string{"op"}))
	if err != nil {
		return nil, err
	}
	for _, op := range allOps {
		c.WithLabelValues(op) // every op shows, 0 until used
	}
	return c, nil
}

// newRequestDurations registers berth_docker_request_seconds on reg (nil: kept,
// not registered), shared like the counter.
func newRequestDurations(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	return registerShared(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "berth_docker_request_seconds",
		Help: "Time dockerd took to answer a request berth sent (to the response headers; berthd's own queueing excluded), by operation.",
		// 1 ms … ~65 s: a list answers in milliseconds, a start under a burst in tens of seconds.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
	}, []string{"op"}))
}

// registerShared registers c on reg, or returns the collector of the same name
// an earlier engine on reg registered.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("register docker request metrics: %w", err)
}

// semaphore is a channel of n slots; nil (unlimited) when n is not positive.
func semaphore(n int) chan struct{} {
	if n <= 0 {
		return nil
	}
	return make(chan struct{}, n)
}

// boundedTransport is the Docker client's RoundTripper: it counts every request
// and bounds container create and start by their configured timeouts. The SDK and
// compose (which runs on the same client) both go through it.
type boundedTransport struct {
	base      http.RoundTripper
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec // nil: not timed
	create    time.Duration            // container_create_timeout
	start     time.Duration            // container_start_timeout
	// slots bounds the requests in flight (nil: unlimited), unbounded ops aside.
	// A slot is held until the answer's headers arrive: dockerd does an API
	// call's work before it answers, and a body left unread cannot hold a slot.
	slots chan struct{}
	// starts bounds container starts in flight (nil: unlimited), held like a slot.
	starts chan struct{}
	// busy counts the requests in flight that are not unbounded (until their
	// headers arrive): background work (the network pool's refill) waits for
	// it to reach zero rather than compete with a burst of provisions.
	busy *atomic.Int64
	// refusals records the starts the daemon answered with a final error (nil: not recorded).
	refusals *startRefusals
}

// unbounded ops hold a request open for as long as something flows (events, logs,
// pulls), a remote registry takes to answer (distribution inspect), or a workload
// takes to exit (stop: up to the stop timeout); bounding them would let a mass
// close or a slow registry starve every short call, so they hold no slot.
func unbounded(op string) bool {
	switch op {
	case opEvents, opContainerLogs, opImagePull, opDistributionInspect, opContainerStop:
		return true
	}
	return false
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := requestOp(req.Method, req.URL.Path)
	t.requests.WithLabelValues(op).Inc()
	if t.busy != nil && !unbounded(op) {
		t.busy.Add(1)
		defer t.busy.Add(-1)
	}
	if t.starts != nil && op == opContainerStart {
		select {
		case t.starts <- struct{}{}:
			defer func() { <-t.starts }()
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if t.slots != nil && !unbounded(op) {
		select {
		case t.slots <- struct{}{}:
			defer func() { <-t.slots }()
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if t.durations != nil {
		began := time.Now()
		defer func() { t.durations.WithLabelValues(op).Observe(time.Since(began).Seconds()) }()
	}
	var limit time.Duration
	switch op {
	case opContainerCreate:
		limit = t.create
	case opContainerStart:
		limit = t.start
	}
	if limit <= 0 {
		resp, err := t.base.RoundTrip(req)
		if err == nil && op == opContainerStart && t.refusals != nil {
			t.refusals.record(req, resp.StatusCode)
		}
		if err == nil && op == opImageInspect {
			resp.Body = &cappedBody{rc: resp.Body, left: maxImageInspectBytes}
		}
		return resp, err
	}
	// WithTimeout keeps the caller's deadline when that one is earlier.
	ctx, cancel := context.WithTimeout(req.Context(), limit)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err == nil && op == opContainerStart && t.refusals != nil {
		t.refusals.record(req, resp.StatusCode)
	}
	if err != nil {
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded) && req.Context().Err() == nil
		cancel()
		if timedOut {
			return nil, &callTimeoutError{op: op, limit: limit, err: err}
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// callTimeoutError is a create or start that Docker did not answer within its
// configured timeout. It unwraps to context.DeadlineExceeded.
type callTimeoutError struct {
	op    string
	limit time.Duration
	err   error
}

func (e *callTimeoutError) Error() string {
	name := "container_create_timeout"
	if e.op == opContainerStart {
		name = "container_start_timeout"
	}
	return fmt.Sprintf("%s: not answered within %s %s: %v", e.op, name, e.limit, e.err)
}

func (e *callTimeoutError) Unwrap() error { return e.err }
func (e *callTimeoutError) Timeout() bool { return true }

// cancelOnClose releases a bounded request's context once its body is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// cappedBody fails a read past its limit instead of handing the decoder more.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("image inspect answer exceeds %d bytes", maxImageInspectBytes)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, fmt.Errorf("image inspect answer exceeds %d bytes", maxImageInspectBytes)
	}
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }

// withBoundedTransport installs t around the client's own transport (which keeps
// its unix-socket dialer) as the last client option; base receives that
// transport, whose idle connections Close releases.
func withBoundedTransport(t boundedTransport, base **http.Transport) client.Opt {
	return func(c *client.Client) error {
		hc := c.HTTPClient() // a copy sharing the configured transport
		if tr, ok := hc.Transport.(*http.Transport); ok {
			*base = tr
		}
		t.base = hc.Transport
		hc.Transport = &t
		return client.WithHTTPClient(hc)(c)
	}
}
