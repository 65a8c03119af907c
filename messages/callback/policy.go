// Package callback is how berthd calls Fred back: the signature on its requests
// and callbacks (sign.go), and the policy for the URLs it sends callbacks to: what
// admission accepts (CheckURL), what the outbox's dialer may connect to
// (Control), the lifecycle URL and operation ID a callback URL gives, and how
// the debug views name a callback (Status, URLPath). A callback URL is tenant input, so without a policy a tenant could make berthd
// POST to its own API or debug listener (the chaos endpoint, or /deprovision) or
// to a cloud metadata service.
//
// The rules, applied to the URL text at admission and again to the address
// actually dialled (after DNS):
//   - never link-local (169.254.0.0/16, fe80::/10, their link-local multicast
//     ranges, IPv4-mapped forms of them, any zoned IPv6 literal);
//   - never one of berthd's own listeners: a loopback, unspecified or local
//     interface address (or localhost) on a port berthd listens on, or exactly
//     one of its listen addresses.
//
// At admission numeric IPv4 hosts must also be canonical dotted quads: octal,
// hex, bare-integer and short forms ("0251.0376.0251.0376", "2852039166",
// "127.1") are read differently by different resolvers and are refused.
// Other loopback receivers (a test's 127.0.0.1 callback server) are fine.
package callback

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// MaxURLLen bounds a callback URL.
const MaxURLLen = 2048

// ErrRefusedDial is wrapped by every dial the policy refuses.
var ErrRefusedDial = errors.New("callback dial refused by policy")

// Policy is the callback URL policy of one berthd.
type Policy struct {
	// Self are berthd's own listen addresses as host:port (listen_addr,
	// debug_listen_addr). An empty host means every interface; port 0 (or an
	// unparsable entry) is ignored.
	Self []string
	// Interfaces lists this host's interface addresses; nil means the host's own
	// (net.InterfaceAddrs). Tests set it to make CheckURL deterministic.
	Interfaces func() ([]netip.Addr, error)
}

// self is one parsed Self entry.
type self struct {
	host string     // lower-cased, "" = all interfaces
	ip   netip.Addr // valid when host is an IP literal
	port int
}

func (p Policy) selves() []self {
	out := make([]self, 0, len(p.Self))
	for _, s := range p.Self {
		host, portText, err := net.SplitHostPort(s)
		if err != nil {
			continue
		}
		port, ok := parsePort(portText)
		if !ok || port == 0 {
			continue
		}
		e := self{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}
		if ip, err := netip.ParseAddr(host); err == nil {
			e.ip = ip.Unmap()
		}
		out = append(out, e)
	}
	return out
}

func (p Policy) selfPort(port int) bool {
	return slices.ContainsFunc(p.selves(), func(s self) bool { return s.port == port })
}

// local reports whether ip is loopback, unspecified or one of this host's
// interface addresses. When the interfaces cannot be listed it answers true: the
// caller only asks about Self ports, where refusing is the safe side.
func (p Policy) local(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	list := p.Interfaces
	if list == nil {
		list = hostInterfaces
	}
	addrs, err := list()
	if err != nil {
		return true
	}
	return slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Unmap().WithZone("") == ip.WithZone("") })
}

func hostInterfaces() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// CheckURL is admission's check of a callback URL: nil when raw may be stored and
// later dialled, else an error wrapping messages.ErrBadRequest with a tenant-safe
// message ("callback URL must …"). It does no DNS: a name is checked again, as
// addresses, when dialled.
func (p Policy) CheckURL(raw string) error { return p.CheckURLField("callback URL", raw) }

// CheckURLField is CheckURL with the refusal naming field ("callback_url",
// "lifecycle_callback_url") instead of "callback URL".
func (p Policy) CheckURLField(field, raw string) error {
	refuse := func(what string) error { return messages.Refuse(messages.ErrBadRequest, "%s %s", field, what) }
	if raw == "" {
		return refuse("is required")
	}
	if len(raw) > MaxURLLen {
		return refuse("too long")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil {
		return refuse("must be an absolute http(s) URL with a host and no user info")
	}
	host := u.Hostname()
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if text := u.Port(); text != "" {
		n, ok := parsePort(text)
		if !ok || n == 0 {
			return refuse("has an invalid port")
		}
		port = n
	}

	ip, err := netip.ParseAddr(host)
	if err != nil {
		if strings.Contains(host, "%") { // a zone ParseAddr could not read: still a scoped literal
			return refuse("must not be link-local")
		}
		if endsInNumber(host) {
			return refuse("host must be a name or a canonical IP address")
		}
		name := strings.ToLower(strings.TrimSuffix(host, "."))
		localhost := name == "localhost" || strings.HasSuffix(name, ".localhost")
		if localhost && p.selfPort(port) ||
			slices.ContainsFunc(p.selves(), func(s self) bool { return s.port == port && s.host != "" && s.host == name }) {
			return refuse("must not target berthd itself")
		}
		return nil
	}
	if ip.Zone() != "" || linkLocal(ip) {
		return refuse("must not be link-local")
	}
	if p.ownListener(ip, port) {
		return refuse("must not target berthd itself")
	}
	return nil
}

// CheckDial is the dial-time check of address ("ip:port", as the dialer passes it
// to Control): nil, or an error wrapping ErrRefusedDial.
func (p Policy) CheckDial(address string) error {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrRefusedDial, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", ErrRefusedDial, host)
	}
	port, ok := parsePort(portText)
	if !ok {
		return fmt.Errorf("%w: invalid port in %q", ErrRefusedDial, address)
	}
	if ip.Zone() != "" || linkLocal(ip) {
		return fmt.Errorf("%w: %s is link-local", ErrRefusedDial, address)
	}
	if p.ownListener(ip, port) {
		return fmt.Errorf("%w: %s is one of berthd's own listeners", ErrRefusedDial, address)
	}
	return nil
}

// Control is a net.Dialer Control function applying CheckDial to every
// connection attempt, after name resolution.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	return p.CheckDial(address)
}

// Dialer is a dialer enforcing the policy, with net/http's default timeouts.
func (p Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
}

// ownListener: a local address on a Self port, or exactly a Self IP:port.
func (p Policy) ownListener(ip netip.Addr, port int) bool {
	ip = ip.Unmap().WithZone("")
	onSelfPort := false
	for _, s := range p.selves() {
		if s.port != port {
			continue
		}
		onSelfPort = true
		if s.ip.IsValid() && s.ip == ip {
			return true
		}
	}
	return onSelfPort && p.local(ip)
}

// linkLocal: link-local unicast or multicast, also in IPv4-mapped or
// IPv4-compatible (::a.b.c.d) form.
func linkLocal(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return true
	}
	if b := ip.As16(); ip.Is6() && [12]byte(b[:12]) == [12]byte{} {
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		return v4.IsLinkLocalUnicast() || v4.IsLinkLocalMulticast()
	}
	return false
}

// endsInNumber is the WHATWG URL rule for "this host is an IPv4 address": its
// last label (ignoring one trailing dot) is decimal digits or 0x-prefixed hex.
// Such a host that is not a canonical dotted quad is ambiguous.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1]
	}
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if allDigits(last, false) {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return allDigits(last[2:], true)
	}
	return false
}

func allDigits(s string, hex bool) bool {
	digits := "0123456789"
	if hex {
		digits += "abcdefABCDEF"
	}
	return strings.Trim(s, digits) == ""
}

// parsePort reads a decimal port 0–65535 (leading zeros allowed, as the dialer
// allows them).
func parsePort(s string) (int, bool) {
	if s == "" || !allDigits(s, false) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 65535 {
		return 0, false
	}
	return n, true
}

// LifecycleURL is the lifecycle callback URL derived from a callback URL: its
// operation_id query parameter becomes lifecycle_id; a URL without operation_id
// is used as is (CONTRACT.md, Callbacks). It edits the raw query pair by pair, so
// every other pair survives byte for byte (url.Values would drop pairs it cannot
// parse and reorder the rest).
func LifecycleURL(callback string) string {
	u, err := url.Parse(callback)
	if err != nil {
		return callback
	}
	pairs := strings.Split(u.RawQuery, "&")
	found := false
	for i, p := range pairs {
		key, val, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && k == "operation_id" {
			pairs[i] = "lifecycle_id=" + val
			found = true
		}
	}
	if !found {
		return callback
	}
	u.RawQuery = strings.Join(pairs, "&")
	return u.String()
}

// CheckOperationID refuses a completion URL whose operation_id the seed would
// refuse: a token present more than once, or not a canonical UUIDv4 (its value
// names the operation in the journal and in Fred). A tokenless URL passes:
// CONTRACT.md lets fred v0.13's client send one, and a 400 would close its
// lease on-chain.
func CheckOperationID(callbackURL string) error {
	u, err := url.Parse(callbackURL)
	if err != nil {
		return nil // CheckURLField has refused it
	}
	var ops []string
	for p := range strings.SplitSeq(u.RawQuery, "&") {
		key, val, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && k == "operation_id" {
			v, err := url.QueryUnescape(val)
			if err != nil {
				v = val
			}
			ops = append(ops, v)
		}
	}
	switch {
	case len(ops) > 1:
		return messages.Refuse(messages.ErrBadRequest, "callback_url carries operation_id %d times; exactly one is allowed", len(ops))
	case len(ops) == 1 && !canonicalUUIDv4(ops[0]):
		return messages.Refuse(messages.ErrBadRequest, "callback_url's operation_id must be a canonical UUIDv4")
	}
	return nil
}

// canonicalUUIDv4 is 8-4-4-4-12 lowercase hex, version 4, RFC 4122 variant.
func canonicalUUIDv4(s string) bool {
	if len(s) != 36 || s[14] != '4' || !strings.ContainsRune("89ab", rune(s[19])) {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// OperationID is the operation's identity: the callback URL's operation_id when
// present, else a fresh UUID.
func OperationID(callback string) string {
	if u, err := url.Parse(callback); err == nil {
		if op := u.Query().Get("operation_id"); op != "" {
			return op
		}
	}
	return uuid.NewString()
}

// Status is the "status" of a callback body ("" when it has none).
func Status(body json.RawMessage) string {
	var cb struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &cb)
	return cb.Status
}

// URLPath is the path of a callback URL: enough to tell provision from lifecycle
// callbacks, without the host or the query.
func URLPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Path
}
