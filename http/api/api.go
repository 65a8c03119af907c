package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

// Deps are what the API handlers ask and check.
type Deps struct {
	Tree         *supervisors.Tree
	RegistryPath messages.Address // leases, admission, health of accounting and the store
	WatcherPath  messages.Address // Docker reachability (GET /health)
	RefreshPath  messages.Address // the runtime refresh (GET and POST /runtime_refresh)
	CleanupPath  messages.Address // the reconciler: GET /cleanup/{lease}
	Diagnostics  func() error     // diagnostics.db's probe (GET /health); nil = none
	VolumeRoot   func() error     // the volume root's proof (GET /health); nil = none
	Verifier     *hmac.Verifier
	Storage      Storage         // named on every protected answer, verified before each protected request
	Callbacks    callback.Policy // checks callback_url of POST /restart and /update
	Gatherer     prometheus.Gatherer
	Metrics      *Metrics
	Log          zerolog.Logger
	AskTimeout   time.Duration // how long a handler waits for an actor
	// HealthTimeout bounds GET /health's asks: an actor that does not answer in
	// time is reported unhealthy at once (a restarting registry is not ready),
	// never a health check left hanging. 0: AskTimeout.
	HealthTimeout time.Duration
	CloseWait     time.Duration // how long POST /deprovision waits for teardown before 503 lifecycle_pending
	// LogsWait is how long GET /logs waits for the one log response served at a
	// time before 503 Retry-After: 1. 0: DefaultLogsWait.
	LogsWait time.Duration
	Now      func() time.Time // receipt time of maintenance commands; nil = time.Now
}

// route is one path with its method and handler.
type route struct {
	pattern string
	auth    bool
	method  string
	handler http.HandlerFunc
}

// Handler builds the API: authenticated routes behind the HMAC middleware, JSON
// 404/405 for anything else, every request logged and counted.
func Handler(d *Deps) http.Handler {
	s := &server{d: d, logSlot: make(chan struct{}, 1)}
	get, post := http.MethodGet, http.MethodPost
	routes := []route{
		{"/health", false, get, s.health},
		{"/stats", false, get, s.stats},
		{"/metrics", false, get, promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{}).ServeHTTP},
		{"/provision", true, post, s.provision},
		{"/deprovision", true, post, s.deprovision},
		{"/info/{lease}", true, get, withLease(s.info)},
		{"/logs/{lease}", true, get, withLease(s.logs)},
		{"/provisions", true, get, s.provisions},
		{"/provisions/{lease}", true, get, withLease(s.provisionOne)},
		{"/retentions", true, get, s.retentions},
		{"/reconcile_custom_domain", true, post, s.reconcileCustomDomain},
		{"/restart", true, post, s.maintain(messages.MaintenanceRestart)},
		{"/update", true, post, s.maintain(messages.MaintenanceUpdate)},
		{"/restore", true, post, s.restore},
		{"/releases/{lease}", true, get, withLease(s.releases)},
		{"/runtime_refresh", true, "", s.runtimeRefresh}, // GET and POST
		{"/cleanup/{lease}", true, get, withLease(s.cleanup)},
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		var h http.Handler = r.handler
		if r.method != "" {
			h = onlyMethod(r.method, r.handler)
		}
		if !r.auth {
			mux.Handle(r.pattern, s.observe(r.pattern, d.Verifier.Unread(h)))
			continue
		}
		h = s.namesStorage(d.Verifier.Middleware(s.bound(h)))
		mux.Handle(r.pattern, s.observe(r.pattern, h))
		mux.Handle(storagePrefix+r.pattern, s.observe(storagePrefix+r.pattern, h))
	}
	mux.Handle("/", s.observe("unknown", d.Verifier.Unread(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}))))
	return mux
}

type server struct {
	d       *Deps
	logSlot chan struct{} // one log response at a time: retrieval, encoding and the write
}

// DefaultLogsWait is how long a log request queues for its turn.
const DefaultLogsWait = 10 * time.Second

// onlyMethod answers any other method with a JSON 405 and Allow. (ServeMux's own
// 404/405 are plain text, so methods are matched here.)
func onlyMethod(method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method {
			h(w, r)
			return
		}
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (the HMAC
// middleware's body read deadlines).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// observe logs and counts every request with its route, status and duration.
func (s *server) observe(routeName string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		d := time.Since(start)
		s.d.Metrics.observe(routeName, rec.status, d)
		ev := s.d.Log.Info()
		if rec.status >= 500 {
			ev = s.d.Log.Warn()
		}
		if lease := r.PathValue("lease"); lease != "" {
			ev = ev.Str("lease_uuid", lease)
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).
			Dur("duration", d).Msg("request")
	})
}

// Metrics of the API.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	auth     *prometheus.CounterVec
}

// NewMetrics registers the API series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_http_requests_total",
			Help: "API requests, by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_http_request_seconds",
			Help: "API request duration, by route.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_http_auth_total",
			Help: "Request authentication outcomes."}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.auth)
	}
	return m
}

// AuthOutcome is the hmac.Verifier's Observe hook.
func (m *Metrics) AuthOutcome(outcome string) { m.auth.WithLabelValues(outcome).Inc() }

func (m *Metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
