// Command berthctl is the operator's client for berthd: it signs requests the way
// providerd does, so an operator (or a newcomer following the README) can drive
// the API by hand, read the actor tree, and receive callbacks.
//
//	berthctl [global flags] provision -lease UUID -image REF [-sku S] [-quantity N] [-manifest FILE] [-callback URL] [-wait]
//	berthctl [global flags] deprovision -lease UUID
//	berthctl [global flags] restore -from UUID [-lease UUID] [-sku S] [-quantity N]   retained data into a new lease
//	berthctl [global flags] get PATH            signed GET, e.g. /provisions or /info/<lease>
//	berthctl [global flags] post PATH [FILE]    signed POST of a JSON body (FILE or stdin)
//	berthctl [global flags] sign METHOD URI [FILE]   print an X-Fred-Signature header value
//	berthctl [global flags] actors [-format text|json|dot]
//	berthctl [global flags] callbacks [-listen ADDR]  receive and verify callbacks, print them
//	berthctl [global flags] doctor [-o table|json]   read-only checks of the host and the daemon
//	berthctl [global flags] prune-installations [-installation ID]... [-min-age D] [-yes]   remove dead installations' idle Docker objects (dry run without -yes)
//	berthctl [global flags] bench [-n N] [-image REF] [-sku S] [-timeout D] [-o table|json]   N concurrent provisions vs raw Docker
//
// The operator's views, each an aligned table or with -o json the daemon's data:
//
//	berthctl [global flags] leases [-status S] [-tenant T]   every live lease
//	berthctl [global flags] lease UUID          status, journal, releases, callbacks, diagnostics, containers
//	berthctl [global flags] tree                the actor tree
//	berthctl [global flags] outbox              callbacks still queued, per lease
//	berthctl [global flags] events [-since SEQ] [-n N]   follow lease transitions (or print the last N)
//	berthctl [global flags] retentions          retained data of closed leases
//
// Any answer other than a 2xx makes berthctl exit 1, after printing it.
//
// Global flags: -api URL (default http://127.0.0.1:9001), -debug URL (default
// http://127.0.0.1:9002), -secret-file FILE (default ./var/berth/callback-secret;
// BERTH_CALLBACK_SECRET overrides), -debug-token TOKEN (debug.token, sent as a
// bearer token to the debug listener; default $BERTH_DEBUG_TOKEN), -config FILE
// (berthd's config file, loaded as berthd loads it: the flags not given come
// from it — listen_addr, debug_listen_addr, callback_secret or the generated
// <data_dir>/callback-secret, debug.token).
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "berthctl:", err)
		os.Exit(1)
	}
}

type client struct {
	api, debug string
	debugToken string
	secret     []byte
	out        io.Writer
	stdin      io.Reader     // post and sign read a body from it
	daemon     *daemonConfig // -config, when given
}

// signed are the subcommands that sign API requests, so need the callback secret.
var signed = map[string]func(*client, []string) error{
	"provision":   (*client).provision,
	"deprovision": (*client).deprovision,
	"restore":     (*client).restore,
	"get":         (*client).get,
	"post":        (*client).post,
	"sign":        (*client).sign,
	"callbacks":   (*client).callbacks,
	"bench":       (*client).bench,
	"lease":       (*client).lease,
	"retentions":  (*client).retentions,
}

// unsigned are the subcommands that need no callback secret: they read only the
// debug listener, or (doctor, prune-installations) the host.
var unsigned = map[string]func(*client, []string) error{
	"actors":              (*client).actors,
	"doctor":              (*client).doctor,
	"prune-installations": (*client).pruneInstallations,
	"leases":              (*client).leases,
	"tree":                view("tree", "/debug/actors?format=json", (*client).printTree),
	"outbox":              view("outbox", "/debug/outbox", (*client).printOutbox),
	"domains":             view("domains", "/debug/domains", (*client).printDomains),
	"events":              (*client).events,
}

func run(args []string, stdin io.Reader, out io.Writer) error {
	global := flag.NewFlagSet("berthctl", flag.ContinueOnError)
	api := global.String("api", "http://127.0.0.1:9001", "berthd API base URL")
	dbg := global.String("debug", "http://127.0.0.1:9002", "berthd debug base URL")
	secretFile := global.String("secret-file", "./var/berth/callback-secret", "file holding callback_secret")
	debugToken := global.String("debug-token", os.Getenv("BERTH_DEBUG_TOKEN"), "debug.token for the debug listener (default $BERTH_DEBUG_TOKEN)")
	configFile := global.String("config", "", "berthd's config file: -api, -debug, the callback secret and -debug-token come from it unless given")
	if err := global.Parse(args); err != nil {
		return err
	}
	rest := global.Args()
	if len(rest) == 0 {
		return errors.New("usage: berthctl [flags] provision|deprovision|restore|get|post|sign|actors|callbacks|doctor|prune-installations|bench|leases|lease|tree|outbox|domains|retentions|events …")
	}
	c := &client{stdin: stdin, out: out}
	if *configFile != "" {
		var err error
		if c.daemon, err = loadDaemonConfig(*configFile, os.Environ()); err != nil {
			return err
		}
		if err := c.daemon.applyTo(global); err != nil {
			return err
		}
	}
	c.api, c.debug, c.debugToken = strings.TrimRight(*api, "/"), strings.TrimRight(*dbg, "/"), *debugToken
	cmd, unsignedCmd := unsigned[rest[0]]
	if !unsignedCmd {
		s, err := resolveSecret(global, c.daemon, *secretFile)
		if err != nil {
			return err
		}
		c.secret = s
		if cmd = signed[rest[0]]; cmd == nil {
			return fmt.Errorf("unknown command %q", rest[0])
		}
	}
	return cmd(c, rest[1:])
}

func (c *client) deprovision(args []string) error {
	fs := flag.NewFlagSet("deprovision", flag.ContinueOnError)
	lease := fs.String("lease", "", "lease UUID")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body, _ := json.Marshal(messages.DeprovisionRequest{LeaseUUID: *lease})
	return c.do(http.MethodPost, "/deprovision", body)
}

func (c *client) get(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: berthctl get PATH")
	}
	return c.do(http.MethodGet, args[0], nil)
}

func (c *client) post(args []string) error {
	path, body, err := c.withBody(args, 1, "usage: berthctl post PATH [FILE]")
	if err != nil {
		return err
	}
	return c.do(http.MethodPost, path[0], body)
}

func (c *client) sign(args []string) error {
	req, body, err := c.withBody(args, 2, "usage: berthctl sign METHOD URI [FILE]")
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, callback.Sign(c.secret, strings.ToUpper(req[0]), req[1], body, time.Now()))
	return nil
}

func (c *client) actors(args []string) error {
	fs := flag.NewFlagSet("actors", flag.ContinueOnError)
	format := fs.String("format", "text", "text, json or dot")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body, err := c.getDebug("/debug/actors?format=" + url.QueryEscape(*format))
	if err != nil {
		return err
	}
	_, err = c.out.Write(body)
	return err
}

func loadSecret(path string) ([]byte, error) {
	if s := os.Getenv("BERTH_CALLBACK_SECRET"); s != "" {
		return []byte(s), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret (set -secret-file or BERTH_CALLBACK_SECRET): %w", err)
	}
	return bytes.TrimRight(b, "\r\n"), nil
}

// withBody splits args into their n leading arguments and a body read from the
// FILE after them, or from stdin when there is none or it is "-".
func (c *client) withBody(args []string, n int, usage string) ([]string, []byte, error) {
	if len(args) < n {
		return nil, nil, errors.New(usage)
	}
	if len(args) > n && args[n] != "-" {
		body, err := os.ReadFile(args[n])
		return args[:n], body, err
	}
	body, err := io.ReadAll(c.stdin)
	return args[:n], body, err
}

// do sends a signed request and prints the status and body; an answer other
// than a 2xx is an error once printed, so scripts see exit 1.
func (c *client) do(method, uri string, body []byte) error {
	status, data, err := c.call(method, uri, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, uri, err)
	}
	fmt.Fprintf(c.out, "%s\n%s", status, data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		fmt.Fprintln(c.out)
	}
	if !success(status) {
		return fmt.Errorf("%s %s: %s", method, uri, status)
	}
	return nil
}

// call sends one signed request and returns its status line and body.
func (c *client) call(method, uri string, body []byte) (string, []byte, error) {
	req, err := http.NewRequest(method, c.api+uri, bytes.NewReader(body))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := callback.SignRequest(c.secret, req, body, time.Now()); err != nil {
		return "", nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", nil, fmt.Errorf("%s %s: read response: %w", method, uri, err)
	}
	return resp.Status, data, nil
}

func (c *client) provision(args []string) error {
	fs := flag.NewFlagSet("provision", flag.ContinueOnError)
	lease := fs.String("lease", uuid.NewString(), "lease UUID (default: a new one)")
	image := fs.String("image", "", "image of a flat single-service manifest")
	manifestFile := fs.String("manifest", "", "manifest JSON file (instead of -image)")
	sku := fs.String("sku", "docker-small", "SKU of the item")
	quantity := fs.Int("quantity", 1, "instances")
	tenant := fs.String("tenant", "tenant-demo", "tenant")
	callback := fs.String("callback", "http://127.0.0.1:9100/callbacks?operation_id="+uuid.NewString(), "callback_url")
	port := fs.String("port", "8080/tcp", "port to publish (flat -image manifests; empty for none)")
	wait := fs.Bool("wait", false, "follow the lease's states until ready (exit 0) or failed (exit 1, with the reason)")
	waitFor := fs.Duration("timeout", 10*time.Minute, "with -wait: give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var manifest []byte
	switch {
	case *manifestFile != "":
		b, err := os.ReadFile(*manifestFile)
		if err != nil {
			return err
		}
		manifest = b
	case *image != "":
		manifest = flatManifest(*image, *port)
	default:
		return errors.New("provision needs -image or -manifest")
	}
	req := messages.ProvisionRequest{
		LeaseUUID:    *lease,
		Tenant:       *tenant,
		ProviderUUID: "provider-demo",
		Items:        []messages.LeaseItem{{SKU: *sku, Quantity: *quantity}},
		CallbackURL:  *callback,
		Payload:      base64.StdEncoding.EncodeToString(manifest),
	}
	body, _ := json.Marshal(req)
	fmt.Fprintf(c.out, "lease %s\n", *lease)
	if !*wait {
		return c.do(http.MethodPost, "/provision", body)
	}
	status, data, err := c.call(http.MethodPost, "/provision", body)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(status, "202") {
		return fmt.Errorf("provision refused: %s %s", status, strings.TrimSpace(string(data)))
	}
	return c.follow(*lease, *waitFor, 250*time.Millisecond)
}

// flatManifest is the manifest of one service running image, publishing port
// ("" for none).
func flatManifest(image, port string) []byte {
	m := map[string]any{"image": image}
	if port != "" {
		m["ports"] = map[string]any{port: map[string]any{}}
	}
	b, _ := json.Marshal(m) // strings only: it cannot fail
	return b
}

// restore asks for a closed lease's retained data in a new lease (GET
// /retentions lists what is retained). The tenant and items must match what
// the source had; a larger disk tier promotes, a smaller one must fit the data.
func (c *client) restore(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", "", "the retained (closed) lease UUID")
	lease := fs.String("lease", uuid.NewString(), "the new lease UUID (default: a new one)")
	sku := fs.String("sku", "docker-small", "SKU of the item")
	quantity := fs.Int("quantity", 1, "instances (as the source had)")
	tenant := fs.String("tenant", "tenant-demo", "tenant (the source's)")
	callback := fs.String("callback", "http://127.0.0.1:9100/callbacks?operation_id="+uuid.NewString(), "callback_url")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" {
		return errors.New("restore needs -from (a lease listed by: berthctl get /retentions)")
	}
	body, _ := json.Marshal(messages.RestoreRequest{LeaseUUID: *lease, FromLeaseUUID: *from, Tenant: *tenant,
		ProviderUUID: "provider-demo", Items: []messages.LeaseItem{{SKU: *sku, Quantity: *quantity}}, CallbackURL: *callback})
	fmt.Fprintf(c.out, "lease %s (from %s)\n", *lease, *from)
	return c.do(http.MethodPost, "/restore", body)
}

// callbacks serves a receiver that verifies each callback's signature and prints it.
func (c *client) callbacks(args []string) error {
	fs := flag.NewFlagSet("callbacks", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9100", "address to receive callbacks on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v := &hmac.Verifier{Secret: c.secret}
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(c.out, "%s %s (signature ok) %s\n", time.Now().Format(time.RFC3339), r.URL.RequestURI(), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	fmt.Fprintf(c.out, "receiving callbacks on http://%s/ (Ctrl-C to stop)\n", *listen)
	return http.ListenAndServe(*listen, h)
}
