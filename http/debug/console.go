package debug

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"strings"
)

// The console: one self-contained page — its CSS and script inlined, no build
// step, nothing fetched from elsewhere — over the JSON API above. It is kept as
// three files for reading and assembled once; the Content-Security-Policy allows
// exactly the two inlined blocks (by hash) and requests back to this listener.

//go:embed console/index.html console/console.css console/console.js
var consoleFiles embed.FS

var consolePage, consoleCSP = assembleConsole()

func assembleConsole() ([]byte, string) {
	read := func(name string) string {
		b, err := consoleFiles.ReadFile(name)
		if err != nil {
			// The files are embedded at build time; a missing one is a build mistake
			// that the package tests catch.
			return ""
		}
		return string(b)
	}
	css, js := read("console/console.css"), read("console/console.js")
	page := strings.NewReplacer("{{css}}", css, "{{js}}", js).Replace(read("console/index.html"))
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(js) + "; style-src " + hash(css) +
		"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	return []byte(page), csp
}

// console is GET /: the page. The token it may have been opened with is never
// written into it; the script reads it from the address bar.
func (s *server) console(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer") // a ?token= URL never leaks as a Referer
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	_, _ = w.Write(consolePage)
}
