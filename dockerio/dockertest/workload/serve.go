package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// maxFileBody caps PUT /file bodies and relayed /fetch bodies.
const maxFileBody = 16 << 20

// workload is the state behind the HTTP endpoints of serve mode.
type workload struct {
	healthy  atomic.Bool
	hostname string
	client   *http.Client
	exit     chan int // first requested exit code wins; buffered 1
}

func newWorkload(hostname string) *workload {
	return &workload{
		hostname: hostname,
		client:   newFetchClient(),
		exit:     make(chan int, 1),
	}
}

// newFetchClient is the client of /fetch, fetch and probe: 2 s timeout, no
// proxy from the environment, no redirects followed (the status is relayed as
// is) and a fresh connection each time, so isolation tests see what one
// connection attempt sees.
func newFetchClient() *http.Client {
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// requestExit asks serve mode to exit with code; later requests are ignored.
func (w *workload) requestExit(code int) {
	select {
	case w.exit <- code:
	default:
	}
}

func (w *workload) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", w.handleRoot)
	mux.HandleFunc("GET /healthz", w.handleHealthz)
	mux.HandleFunc("POST /health/fail", w.handleHealthSet(false))
	mux.HandleFunc("POST /health/pass", w.handleHealthSet(true))
	mux.HandleFunc("GET /file", handleFileRead)
	mux.HandleFunc("PUT /file", handleFileWrite)
	mux.HandleFunc("GET /fetch", w.handleFetch)
	mux.HandleFunc("POST /exit", w.handleExit)
	mux.HandleFunc("GET /env", handleEnv)
	mux.HandleFunc("GET /id", handleID)
	return mux
}

func (w *workload) handleRoot(rw http.ResponseWriter, _ *http.Request) {
	fmt.Fprintf(rw, "ok %s\n", w.hostname)
}

func (w *workload) handleHealthz(rw http.ResponseWriter, _ *http.Request) {
	if !w.healthy.Load() {
		http.Error(rw, "unhealthy", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(rw, "healthy")
}

func (w *workload) handleHealthSet(healthy bool) http.HandlerFunc {
	return func(rw http.ResponseWriter, _ *http.Request) {
		w.healthy.Store(healthy)
		if healthy {
			fmt.Fprintln(rw, "health: pass")
		} else {
			fmt.Fprintln(rw, "health: fail")
		}
	}
}

// absPathParam returns the cleaned absolute path in ?path=, or writes a 400.
func absPathParam(rw http.ResponseWriter, r *http.Request) (string, bool) {
	p := r.URL.Query().Get("path")
	if !filepath.IsAbs(p) {
		http.Error(rw, "path must be an absolute path", http.StatusBadRequest)
		return "", false
	}
	return filepath.Clean(p), true
}

func handleFileRead(rw http.ResponseWriter, r *http.Request) {
	p, ok := absPathParam(rw, r)
	if !ok {
		return
	}
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		http.Error(rw, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	default:
		rw.Write(data)
	}
}

func handleFileWrite(rw http.ResponseWriter, r *http.Request) {
	p, ok := absPathParam(rw, r)
	if !ok {
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxFileBody))
	if err != nil {
		http.Error(rw, "read body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if err := writeFile(p, data); err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(rw, "wrote %d bytes to %s\n", len(data), p)
}

// writeFile writes data at path, creating parent directories.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create parent of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// handleFetch GETs ?url= from inside the container and relays status and body.
// A DNS failure is a 502 carrying the resolver's error text, a timeout a 504,
// any other transport failure a 502.
func (w *workload) handleFetch(rw http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("url")
	if target == "" {
		http.Error(rw, "url is required", http.StatusBadRequest)
		return
	}
	resp, err := w.client.Get(target)
	if err != nil {
		http.Error(rw, err.Error(), fetchErrorStatus(err))
		return
	}
	defer resp.Body.Close()
	rw.WriteHeader(resp.StatusCode)
	io.Copy(rw, io.LimitReader(resp.Body, maxFileBody))
}

func fetchErrorStatus(err error) int {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		return http.StatusBadGateway
	case errors.As(err, &netErr) && netErr.Timeout():
		return http.StatusGatewayTimeout
	default:
		return http.StatusBadGateway
	}
}

// handleExit answers, then asks serve mode to shut down and exit with ?code=.
func (w *workload) handleExit(rw http.ResponseWriter, r *http.Request) {
	code, err := strconv.Atoi(r.URL.Query().Get("code"))
	if err != nil || code < 0 || code > 255 {
		http.Error(rw, "code must be an integer 0-255", http.StatusBadRequest)
		return
	}
	fmt.Fprintf(rw, "exiting with code %d\n", code)
	w.requestExit(code)
}

func handleEnv(rw http.ResponseWriter, r *http.Request) {
	v, ok := os.LookupEnv(r.URL.Query().Get("name"))
	if !ok {
		http.Error(rw, "unset", http.StatusNotFound)
		return
	}
	fmt.Fprintln(rw, v)
}

// handleID reports the uid and gid the workload runs as (for `user` tests).
func handleID(rw http.ResponseWriter, _ *http.Request) {
	fmt.Fprintf(rw, "uid=%d gid=%d\n", os.Getuid(), os.Getgid())
}

// listening is told serve mode's address once it accepts connections; tests
// replace it to find a -port 0 server.
var listening = func(net.Addr) {}

// serveConfig is serve mode's flags.
type serveConfig struct {
	port          int
	unhealthy     bool
	healthAfter   time.Duration
	logs          int
	exitAfter     time.Duration
	exitCode      int
	ignoreSigterm bool
	writes        fileWrites
}

func runServe(args []string, stdout, stderr io.Writer) int {
	var cfg serveConfig
	fs := newFlagSet("serve", stderr)
	fs.IntVar(&cfg.port, "port", 8080, "TCP port to serve HTTP on (0 picks one)")
	fs.BoolVar(&cfg.unhealthy, "unhealthy", false, "start with /healthz failing")
	fs.DurationVar(&cfg.healthAfter, "health-after", 0, "fail /healthz until this long after start")
	fs.IntVar(&cfg.logs, "logs", 0, "print this many numbered lines to stdout at start")
	fs.DurationVar(&cfg.exitAfter, "exit-after", 0, "exit this long after start (0: never)")
	fs.IntVar(&cfg.exitCode, "exit-code", 0, "exit code used by -exit-after")
	fs.BoolVar(&cfg.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM (only SIGKILL stops it)")
	fs.Var(&cfg.writes, "write", "write P=content at start (repeatable)")
	if !parseOrReport(fs, args, nil, stderr) {
		return 2
	}
	signals := watchSignals(cfg.ignoreSigterm)
	defer stopSignals(signals)

	for _, fw := range cfg.writes {
		if err := writeFile(fw.path, []byte(fw.content)); err != nil {
			fmt.Fprintf(stderr, "workload serve: %v\n", err)
			return 1
		}
	}
	printLines(stdout, cfg.logs)

	hostname, _ := os.Hostname()
	w := newWorkload(hostname)
	w.healthy.Store(!cfg.unhealthy && cfg.healthAfter <= 0)
	if !cfg.unhealthy && cfg.healthAfter > 0 {
		t := time.AfterFunc(cfg.healthAfter, func() { w.healthy.Store(true) })
		defer t.Stop()
	}
	if cfg.exitAfter > 0 {
		t := time.AfterFunc(cfg.exitAfter, func() { w.requestExit(cfg.exitCode) })
		defer t.Stop()
	}

	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.port)))
	if err != nil {
		fmt.Fprintf(stderr, "workload serve: %v\n", err)
		return 1
	}
	listening(ln.Addr())
	srv := &http.Server{Handler: w.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	code := 0
	select {
	case code = <-w.exit:
	case <-signals:
	case err := <-served:
		fmt.Fprintf(stderr, "workload serve: %v\n", err)
		return 1
	}
	// Let in-flight responses (the /exit answer among them) reach the client.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return code
}

// printLines prints "line 1" … "line n" to w.
func printLines(w io.Writer, n int) {
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
}
