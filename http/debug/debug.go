// Package debug serves the operator's debug listener: the live actor tree
// (GET /debug/actors as JSON, ?format=text or ?format=dot), pprof, and — only with
// debug.chaos and debug.token — POST /debug/chaos/crash?actor=<path>; the
// operator's read-only JSON API (leases, a lease's history, the callback outbox,
// background-pass freshness, recent transitions, the custom-domain DNS gates, and a
// Server-Sent Events stream)
// and the console page over it (GET /). With debug.token every endpoint requires
// "Authorization: Bearer <token>"; the console page alone also takes it as
// ?token=, which its script then sends as that header.
package debug

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Options of the debug listener.
type Options struct {
	Chaos bool   // debug.chaos: enables POST /debug/chaos/crash, which also needs Token
	Token string // debug.token, required on every endpoint when set (see the package doc)

	// What the operator's API reads; unset paths answer 503 (no such actor).
	RegistryPath   messages.Address   // lease rows, transitions, releases
	OutboxPath     messages.Address   // delivery attempts and recent deliveries
	PassPaths      []messages.Address // background actors answering GetPass (reconciler, reclaimer, netpool, reaper, imagegc)
	DomainGatePath messages.Address   // the custom-domain DNS gate (ingress on); unset: GET /debug/domains says it is off
	// Reads reads the stores: a lease's journal, queued outbox rows, stored
	// failure captures. Nil: not served.
	Reads Reads

	Now        func() time.Time // nil = time.Now
	AskTimeout time.Duration    // how long a handler waits for an actor (0 = 5 s)
	// The event stream's cadences (0 = 2 s tree, 500 ms transitions) and lifetime
	// (0 = 30 min, after which the client reconnects).
	TreeEvery      time.Duration
	TransitionPoll time.Duration
	StreamLifetime time.Duration
	// StreamWriteGrace is how long a stream client may take to accept a write
	// before it is dropped (0 = 10 s).
	StreamWriteGrace time.Duration
}

// Handler builds the debug mux.
func Handler(tree *supervisors.Tree, opts Options) http.Handler {
	s := newServer(tree, opts)
	mux := http.NewServeMux()
	s.routes(mux)
	mux.HandleFunc("GET /debug/actors", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		root := tree.DescribeTree(ctx)
		switch r.URL.Query().Get("format") {
		case "", "json":
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(root)
		case "text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(Text(root)))
		case "dot":
			w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
			_, _ = w.Write([]byte(DOT(root)))
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "format must be json, text or dot"})
		}
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("POST /debug/chaos/crash", func(w http.ResponseWriter, r *http.Request) {
		if !opts.Chaos {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "chaos is disabled (debug.chaos: false)"})
			return
		}
		if opts.Token == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "chaos requires debug.token"})
			return
		}
		path := messages.Address(r.URL.Query().Get("actor"))
		if _, ok := tree.Dir.Get(path); !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no live actor at that path"})
			return
		}
		tree.Send(path, &messages.Crash{})
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "crash sent", "actor": string(path)})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	})
	if opts.Token == "" {
		return mux
	}
	want := sha256.Sum256([]byte(opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearer(r, want) && !consoleToken(r, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berthd debug"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or invalid debug token"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bearer reports whether r carries "Authorization: Bearer <token>" for the token
// whose sha256 is want. Digests of equal length are compared in constant time, so
// neither the token nor its length leaks through timing.
func bearer(r *http.Request, want [sha256.Size]byte) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return sameToken(strings.TrimSpace(token), want)
}

// consoleToken reports whether r is GET / (the console page, which a browser
// opens by URL and so cannot send a header) carrying ?token=<token>. Only the
// page takes it there; its script sends the header on every call it makes.
func consoleToken(r *http.Request, want [sha256.Size]byte) bool {
	if r.URL.Path != "/" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	token := r.URL.Query().Get("token")
	return token != "" && sameToken(token, want)
}

func sameToken(token string, want [sha256.Size]byte) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Text renders the tree indented, one actor per line.
func Text(root messages.NodeInfo) string {
	var b strings.Builder
	var walk func(n messages.NodeInfo, prefix, branch string)
	walk = func(n messages.NodeInfo, prefix, branch string) {
		fmt.Fprintf(&b, "%s%s%s [%s] %s", prefix, branch, name(n.Path), n.Kind, n.Status)
		if n.State != "" {
			fmt.Fprintf(&b, " — %s", n.State)
		}
		fmt.Fprintf(&b, " (restarts=%d mailbox=%d in_flight=%d)\n", n.Restarts, n.MailboxDepth, n.InFlight)
		next := prefix + map[string]string{"├── ": "│   ", "└── ": "    "}[branch]
		for i, c := range n.Children {
			br := "├── "
			if i == len(n.Children)-1 {
				br = "└── "
			}
			walk(c, next, br)
		}
	}
	walk(root, "", "")
	return b.String()
}

// DOT renders the tree for Graphviz; unresponsive actors are drawn red.
func DOT(root messages.NodeInfo) string {
	var b strings.Builder
	b.WriteString("digraph berth {\n  node [shape=box, fontname=\"monospace\"];\n")
	var walk func(n messages.NodeInfo)
	walk = func(n messages.NodeInfo) {
		label := fmt.Sprintf("%s\\n[%s] %s\\nrestarts=%d mailbox=%d in_flight=%d", name(n.Path), n.Kind,
			escape(n.State), n.Restarts, n.MailboxDepth, n.InFlight)
		color := ""
		if n.Status != "ok" {
			color = ", color=red, fontcolor=red"
		}
		fmt.Fprintf(&b, "  %q [label=\"%s\"%s];\n", n.Path, label, color)
		for _, c := range n.Children {
			fmt.Fprintf(&b, "  %q -> %q;\n", n.Path, c.Path)
			walk(c)
		}
	}
	walk(root)
	b.WriteString("}\n")
	return b.String()
}

// name is the last element of an actor path.
func name(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
