package debug_test

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-dev/berth/http/debug"
)

func TestConsole_TheTokenOpensThePageOnlyAndIsNeverInIt(t *testing.T) {
	srv, _ := serve(t, debug.Options{Token: token})
	get := func(method, path, auth string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, page := get(http.MethodGet, "/?token="+token, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /?token=: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if strings.Contains(page, token) {
		t.Fatal("the page echoes the token")
	}
	for h, want := range map[string]string{"Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
		"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// The policy allows exactly the page's inline script and style.
	csp := resp.Header.Get("Content-Security-Policy")
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	script := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(page, -1)
	if len(script) != 1 || len(style) != 1 || len(script[0][1]) < 1000 || len(style[0][1]) < 100 {
		t.Fatalf("the page inlines %d scripts and %d styles", len(script), len(style))
	}
	for _, want := range []string{"default-src 'none'", "script-src " + hash(script[0][1]), "style-src " + hash(style[0][1]), "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if strings.Contains(page, "{{") || regexp.MustCompile(`(?i)<(script|link)[^>]+(src|href)=`).MatchString(page) {
		t.Fatal("the page loads something from elsewhere or was not assembled")
	}
	for _, id := range []string{`id="tree"`, `id="leases"`, `id="outbox"`, `id="freshness"`, `id="transitions"`, `id="detail"`,
		"data-lease", "data-actor", "data-restarts", "/debug/events", "Authorization",
		`id="detail-ingress"`, `id="domains"`, "/debug/domains", "data-fqdn", "data-gate"} {
		if !strings.Contains(page, id) {
			t.Errorf("the page lacks %s", id)
		}
	}
	if resp, _ := get(http.MethodGet, "/", "Bearer "+token); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the header: %d", resp.StatusCode)
	}

	for _, c := range []struct{ method, path, auth string }{
		{http.MethodGet, "/", ""},
		{http.MethodGet, "/?token=wrong", ""},
		{http.MethodGet, "/?token=", ""},
		{http.MethodGet, "/?token=" + token + "x", ""},
		{http.MethodPost, "/?token=" + token, ""},
		{http.MethodGet, "/debug/leases?token=" + token, ""}, // only the page takes the query token
		{http.MethodGet, "/debug/actors?token=" + token, ""},
		{http.MethodPost, "/debug/chaos/crash?actor=" + victimPath + "&token=" + token, ""},
	} {
		if resp, body := get(c.method, c.path, c.auth); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "<html") {
			t.Errorf("%s %s: %d, want 401 without the page", c.method, c.path, resp.StatusCode)
		}
	}

	open, _ := serve(t, debug.Options{})
	if status, body := call(t, open, http.MethodGet, "/", ""); status != http.StatusOK || !strings.Contains(body, "berthd console") {
		t.Fatalf("GET / without a configured token: %d", status)
	}
	if status, _ := call(t, open, http.MethodGet, "/index.html", ""); status != http.StatusNotFound {
		t.Fatalf("GET /index.html: %d, want 404 (the page is / only)", status)
	}
}
