package policy

import (
	"strings"
	"testing"
)

func TestValidateCustomDomain_Accepted_Normalized(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example.org":      "shop.example.org",
		"Shop.Example.ORG.":     "shop.example.org",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"a-b.c-d.example.co.uk": "a-b.c-d.example.co.uk",
		"apps.example.com.evil": "apps.example.com.evil",
		"notapps.example.com":   "notapps.example.com",
		"123.example.com":       "123.example.com",
	} {
		got, err := ValidateCustomDomain(in, "apps.example.com")
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
}

func TestValidateCustomDomain_Refused_WithReason(t *testing.T) {
	cases := []struct{ name, domain, reason string }{
		{"empty", "", "must not be empty"},
		{"localhost", "localhost", "not a fully qualified"},
		{"under localhost", "app.localhost", "is localhost"},
		{"IPv4", "203.0.113.7", "IP address"},
		{"IPv6", "2001:db8::1", "IP address"},
		{"bracketed IPv6", "[2001:db8::1]", "IP address"},
		{"the wildcard domain", "apps.example.com", "under the wildcard domain"},
		{"under the wildcard domain", "x.APPS.example.com", "under the wildcard domain"},
		{"300 characters", strings.Repeat("a.", 150), "at most 253"},
		{"label of 64", strings.Repeat("a", 64) + ".com", "at most 63"},
		{"unicode look-alike (Cyrillic а)", "exаmple.com", "only ASCII"},
		{"underscore", "my_shop.example.com", "only ASCII"},
		{"leading hyphen", "-shop.example.com", "hyphen"},
		{"empty label", "shop..example.com", "empty label"},
		{"numeric top level", "shop.example.123", "numeric label"},
		{"single label", "shop", "not a fully qualified"},
		{"with a scheme", "https://shop.example.com", "only ASCII"},
		{"with a port", "shop.example.com:443", "only ASCII"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ValidateCustomDomain(c.domain, "apps.example.com")
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("%q: %q %v, want an error saying %q", c.domain, got, err, c.reason)
			}
		})
	}
}

func TestValidateWildcardDomain(t *testing.T) {
	for w, want := range map[string]string{
		"apps.example.com":                       "",
		"Apps.Example.com.":                      "",
		"":                                       "at least two labels",
		"example":                                "at least two labels",
		"*.apps.example.com":                     "only ASCII",
		"203.0.113.7":                            "IP address",
		strings.Repeat("a", 63) + ".example.com": "",
		strings.Repeat(strings.Repeat("a", 60)+".", 4) + "com": "at most 189",
	} {
		err := ValidateWildcardDomain(w)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", w, err, want)
		}
	}
}
