// Package policy is what berth allows tenants, decided without Docker: the
// names a tenant may route to (custom domains, the wildcard they stay out of).
// The registry checks a request against it at admission; the Docker adapter
// asserts the same rules on what it launches (dockerio/ingress).
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxLabel is the longest DNS label (RFC 1035 §2.3.4).
const MaxLabel = 63

// MaxName is the longest name in presentation form without the root dot.
const MaxName = 253

// CustomDomains is the custom-domain rule of a host with ingress on: a
// tenant's domain is an FQDN outside Wildcard, whose names berth assigns.
type CustomDomains struct{ Wildcard string }

// Check validates domain and returns it in the form berth keeps.
func (c CustomDomains) Check(domain string) (string, error) {
	return ValidateCustomDomain(domain, c.Wildcard)
}

// ValidateCustomDomain checks a tenant's custom domain and returns it in the
// form berth keeps (lower case, no root dot). It must be a syntactically valid
// FQDN of ASCII letters, digits and hyphens (an internationalized name comes as
// its xn-- form, so a look-alike of another name cannot pass as it), of at
// least two labels with a non-numeric top level; not an IP address, not
// localhost, and neither wildcard itself nor under it (those names are berth's
// to hand out). Whether another lease holds it is the registry's to say.
func ValidateCustomDomain(domain, wildcard string) (string, error) {
	if domain == "" {
		return "", errors.New("custom_domain: must not be empty")
	}
	d := strings.ToLower(strings.TrimSuffix(domain, "."))
	if len(d) > MaxName {
		return "", fmt.Errorf("custom_domain: %d characters, at most %d", len(d), MaxName)
	}
	if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
		return "", fmt.Errorf("custom_domain: %q is an IP address, not a domain name", domain)
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", fmt.Errorf("custom_domain: %q is not a fully qualified domain name", excerpt(domain))
	}
	for _, l := range labels {
		if problem := labelProblem(l); problem != "" {
			return "", fmt.Errorf("custom_domain: %q: %s", excerpt(domain), problem)
		}
	}
	if tld := labels[len(labels)-1]; strings.Trim(tld, "0123456789") == "" {
		return "", fmt.Errorf("custom_domain: %q ends in a numeric label, which no top-level domain is", domain)
	}
	if d == "localhost" || strings.HasSuffix(d, ".localhost") {
		return "", fmt.Errorf("custom_domain: %q is localhost", domain)
	}
	if w := strings.ToLower(strings.TrimSuffix(wildcard, ".")); w != "" && (d == w || strings.HasSuffix(d, "."+w)) {
		return "", fmt.Errorf("custom_domain: %q is under the wildcard domain %s, whose names berth assigns", domain, w)
	}
	return d, nil
}

// labelProblem says what is wrong with one DNS label ("" when nothing is).
func labelProblem(l string) string {
	switch {
	case l == "":
		return "has an empty label"
	case len(l) > MaxLabel:
		return fmt.Sprintf("label of %d characters, at most %d", len(l), MaxLabel)
	case l[0] == '-' || l[len(l)-1] == '-':
		return fmt.Sprintf("label %q starts or ends with a hyphen", l)
	}
	for _, r := range l {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return fmt.Sprintf("label %q has %q: only ASCII letters, digits and hyphens (an internationalized name in its xn-- form)", excerpt(l), r)
		}
	}
	return ""
}

// excerpt bounds what an error quotes of tenant input.
func excerpt(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// ValidateWildcardDomain checks ingress.wildcard_domain: a domain name of at
// least two labels with room under it for every container's longest label.
func ValidateWildcardDomain(w string) error {
	d := strings.ToLower(strings.TrimSuffix(w, "."))
	if room := MaxName - MaxLabel - 1; len(d) > room {
		return fmt.Errorf("%d characters, at most %d: every container's name (a label of up to %d) must fit under it", len(d), room, MaxLabel)
	}
	if _, err := netip.ParseAddr(d); err == nil {
		return errors.New("is an IP address, not a domain name")
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return errors.New("must be a domain of at least two labels, such as apps.example.com")
	}
	for _, l := range labels {
		if problem := labelProblem(l); problem != "" {
			return errors.New(problem)
		}
	}
	return nil
}
