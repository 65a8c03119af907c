package manifest

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

func TestRegistry_Valid(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	for ref, want := range map[string]string{
		"nginx":                               "docker.io",
		"nginx:1":                             "docker.io",
		"library/nginx:1":                     "docker.io",
		"ghcr.io/o/a:v1":                      "ghcr.io",
		"localhost:5000/x":                    "localhost:5000",
		"localhost/x":                         "localhost",
		"127.0.0.1:5000/berth/workload:test":  "127.0.0.1:5000",
		"index.docker.io/x":                   "docker.io",
		"docker.io/x":                         "docker.io",
		"Docker.IO/library/x":                 "docker.io",
		"registry.example.com:443/a/b/c:1.0":  "registry.example.com:443",
		"[::1]:5000/x":                        "[::1]:5000",
		"my-registry/x":                       "docker.io", // no dot/colon: a Docker Hub namespace
		"localhost:5000":                      "docker.io", // repository "localhost", tag "5000"
		"a.b/c__d.e-f---g:TAG_1.x-y":          "a.b",
		"nginx@sha256:" + hex64:               "docker.io",
		"nginx:1.27@sha256:" + hex64:          "docker.io",
		"ghcr.io/o/a@sha512:" + hex64 + hex64: "ghcr.io",
	} {
		got, err := Registry(ref)
		if err != nil {
			t.Errorf("Registry(%q): %v", ref, err)
			continue
		}
		if got != want {
			t.Errorf("Registry(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestRegistry_Invalid(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	for _, ref := range []string{
		"",
		"NGINX",
		"Foo/bar", // uppercase first component is not a registry, so it is a bad path
		"ngin x",
		" nginx",
		"nginx:",
		"nginx:-tag",
		"nginx:" + strings.Repeat("t", 129),
		"nginx@",
		"nginx@sha256:abc",
		"nginx@sha256:" + strings.ToUpper(hex64),
		"nginx@md5:" + hex64,
		"nginx@sha512:" + hex64,
		"ghcr.io/",
		"ghcr.io//x",
		"ghcr.io/x/",
		"/x",
		"-x",
		"x-",
		"a..b/x",
		"-a.b/x",
		"a_b.c/x",
		"ghcr.io:port/x",
		"ghcr.io/A",
		"x/" + strings.Repeat("a", 254),
		strings.Repeat("a", 513),
		hex64,
		"docker.io/" + hex64,
		"nginx\x00",
		"ghcr.io/o/a:v1\n",
	} {
		host, err := Registry(ref)
		assertRefusal(t, err, messages.ErrInvalidManifest, "not a valid reference")
		if host != "" {
			t.Errorf("Registry(%q) returned host %q with an error", ref, host)
		}
	}
}

func TestNormalizeRegistries(t *testing.T) {
	got, err := NormalizeRegistries([]string{"docker.io", "index.docker.io", "GHCR.IO", " 127.0.0.1:5000 ", "[::1]:5000"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docker.io", "docker.io", "ghcr.io", "127.0.0.1:5000", "[::1]:5000"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"https://ghcr.io", "ghcr.io/org", "", "ghcr.io:port", "a b"} {
		if _, err := NormalizeRegistries([]string{bad}); err == nil {
			t.Errorf("NormalizeRegistries(%q) accepted", bad)
		}
	}
}
