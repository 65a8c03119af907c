package manifest

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/berth-dev/berth/messages"
)

// Image references follow the grammar of github.com/distribution/reference (what
// Docker itself parses with), restated here so the package adds no direct
// dependency and refusals stay tenant-safe.
const (
	// maxImageBytes caps the whole reference (name, tag and digest).
	maxImageBytes = 512
	// maxNameBytes is distribution's NameTotalLengthMax (domain + path).
	maxNameBytes = 255

	defaultRegistry = "docker.io"
	legacyRegistry  = "index.docker.io"
)

var (
	// domain[:port]: dotted hostname labels or a bracketed IPv6 address.
	domainRE = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?$`)
	// one repository path component: lowercase alphanumerics joined by . _ __ or dashes.
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	tagRE           = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	// a 64-hex repository name is an image ID, which Docker refuses as a name.
	identifierRE = regexp.MustCompile(`^[a-f0-9]{64}$`)
	digestRE     = regexp.MustCompile(`^(sha256|sha384|sha512):([a-f0-9]+)$`)
)

var digestHexLen = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}

// Registry returns the normalised registry host of an image reference, Docker-style:
// a first path component is a registry only if it contains "." or ":" or is
// "localhost"; otherwise the image lives on docker.io. The host is lowercased (DNS
// is case-insensitive) and index.docker.io is folded into docker.io. An invalid
// reference is refused with ErrInvalidManifest.
func Registry(ref string) (string, error) {
	host, reason := parseReference(ref)
	if reason != "" {
		return "", refuse(messages.ErrInvalidManifest, "image %s is not a valid reference: %s", excerpt(ref), reason)
	}
	return host, nil
}

// parseReference validates ref and returns its normalised registry host, or a
// tenant-safe reason why ref is invalid (which never echoes ref).
func parseReference(ref string) (host, reason string) {
	switch {
	case ref == "":
		return "", "it is empty"
	case len(ref) > maxImageBytes:
		return "", fmt.Sprintf("it is longer than %d bytes", maxImageBytes)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		m := digestRE.FindStringSubmatch(digest)
		if m == nil || len(m[2]) != digestHexLen[m[1]] {
			return "", "the digest must be sha256, sha384 or sha512 with lowercase hex of full length"
		}
	}
	// A tag is the part after the last ":" that follows the last "/"; a ":" before
	// a "/" belongs to a registry port.
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		if !tagRE.MatchString(name[i+1:]) {
			return "", "the tag must be 1-128 of [A-Za-z0-9_.-] not starting with . or -"
		}
		name = name[:i]
	}
	if name == "" {
		return "", "the repository name is empty"
	}
	if len(name) > maxNameBytes {
		return "", fmt.Sprintf("the repository name is longer than %d bytes", maxNameBytes)
	}
	host, path := defaultRegistry, name
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		if !domainRE.MatchString(first) {
			return "", "the registry host is not a valid host[:port]"
		}
		host, path = normalizeRegistryHost(first), rest
	}
	for _, c := range strings.Split(path, "/") {
		if !pathComponentRE.MatchString(c) {
			return "", "repository path components must be lowercase [a-z0-9] joined by '.', '_', '__' or '-'"
		}
	}
	if host == defaultRegistry && identifierRE.MatchString(path) {
		return "", "a 64-hex repository name is an image ID, not a name"
	}
	return host, ""
}

// normalizeRegistryHost folds the case of a registry host and Docker Hub's legacy
// name, so references and allowlist entries compare equal.
func normalizeRegistryHost(h string) string {
	h = strings.ToLower(h)
	if h == legacyRegistry {
		return defaultRegistry
	}
	return h
}

// NormalizeRegistries validates allowed_registries entries (host or host:port, as
// an operator writes them) and returns them normalised as Build compares them. It
// is meant for configuration checks at startup: an entry such as
// "https://ghcr.io" or "ghcr.io/org" would otherwise silently allow nothing.
func NormalizeRegistries(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if !domainRE.MatchString(e) {
			return nil, fmt.Errorf("allowed registry %q: want a registry host or host:port (no scheme, no path)", e)
		}
		out = append(out, normalizeRegistryHost(e))
	}
	return out, nil
}

// allowSet is the normalised allowlist; entries that are not hosts never match.
func allowSet(entries []string) map[string]struct{} {
	set := make(map[string]struct{}, len(entries))
	for _, e := range entries {
		set[normalizeRegistryHost(strings.TrimSpace(e))] = struct{}{}
	}
	return set
}
