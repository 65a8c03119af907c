package callback_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
)

// policy is berthd on API 0.0.0.0:9001 and debug 127.0.0.1:9002, on a host whose
// interfaces are loopback plus 10.1.2.3 and 2001:db8::7.
func policy() callback.Policy {
	return callback.Policy{
		Self: []string{"0.0.0.0:9001", "127.0.0.1:9002"},
		Interfaces: func() ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"),
				netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::7")}, nil
		},
	}
}

func TestCheckURL_AcceptsOrdinaryReceivers(t *testing.T) {
	for _, raw := range []string{
		"https://fred.example/callbacks?operation_id=abc",
		"http://fred.example:8080/cb",
		"http://127.0.0.1:9100/callbacks?operation_id=x", // a local receiver on another port
		"http://localhost:9100/cb",
		"http://[::1]:9100/cb",
		"http://10.1.2.3:8443/cb",         // this host, but not a berthd port
		"http://192.0.2.10:9001/cb",       // a berthd port, but another host
		"http://fred.example:9002/cb",     // a name: checked again when dialled
		"http://203.0.113.5/cb",           // canonical dotted quad
		"https://[2001:db8::1]:443/cb",    // IPv6 literal
		"http://169.253.255.255/cb",       // just below 169.254/16
		"http://169.255.0.0/cb",           // just above
		"http://[fec0::1]/cb",             // not fe80::/10
		"http://api-2.fred.example:80/cb", // a name whose last label is not numeric
	} {
		if err := policy().CheckURL(raw); err != nil {
			t.Errorf("CheckURL(%q) = %v, want accepted", raw, err)
		}
	}
}

func TestCheckURL_RefusesWithATenantSafeBadRequest(t *testing.T) {
	cases := []struct {
		raw, want string
	}{
		// shape
		{"", "required"},
		{"gopher://fred.example/", "absolute http(s) URL"},
		{"/relative/path", "absolute http(s) URL"},
		{"http:///no-host", "absolute http(s) URL"},
		{"http://user:pw@fred.example/cb", "user info"},
		{"http://fred.example:99999/cb", "invalid port"},
		{"http://fred.example:0/cb", "invalid port"},
		{"http://" + strings.Repeat("a", callback.MaxURLLen) + ".example/", "too long"},
		// link-local, in every spelling
		{"http://169.254.169.254/latest/meta-data", "link-local"},
		{"http://169.254.0.1:8080/", "link-local"},
		{"http://[fe80::1]/cb", "link-local"},
		{"http://[FE80::abcd]/cb", "link-local"},
		{"http://[febf::1]/cb", "link-local"},
		{"http://[fe80::1%25eth0]/cb", "link-local"},
		{"http://[2001:db8::1%25eth0]/cb", "link-local"}, // any zoned literal
		{"http://[::ffff:169.254.169.254]/cb", "link-local"},
		{"http://[::ffff:a9fe:a9fe]/cb", "link-local"},
		{"http://[::169.254.169.254]/cb", "link-local"},
		{"http://224.0.0.251/cb", "link-local"},
		{"http://[ff02::1]/cb", "link-local"},
		// non-canonical numeric IPv4 (169.254.169.254 and 127.0.0.1 in disguise)
		{"http://0251.0376.0251.0376/cb", "canonical"},
		{"http://2852039166/cb", "canonical"},
		{"http://0xa9fea9fe/cb", "canonical"},
		{"http://0xA9.0xFE.0xA9.0xFE/cb", "canonical"},
		{"http://169.254.43518/cb", "canonical"},
		{"http://127.1:9002/cb", "canonical"},
		{"http://0177.0.0.1:9002/cb", "canonical"},
		{"http://127.0.0.1.:9002/cb", "canonical"},
		{"http://1.2.3.4.5/cb", "canonical"},
		{"http://0x/cb", "canonical"},
		{"http://fred.example.123/cb", "canonical"},
		// berthd's own listeners
		{"http://127.0.0.1:9002/debug/chaos/crash?actor=root/registry", "berthd itself"},
		{"http://127.0.0.1:09002/debug/chaos/crash", "berthd itself"},
		{"http://localhost:9002/debug/chaos/crash", "berthd itself"},
		{"http://LOCALHOST.:9002/", "berthd itself"},
		{"http://berth.localhost:9001/", "berthd itself"},
		{"http://0.0.0.0:9002/", "berthd itself"},
		{"http://[::1]:9002/", "berthd itself"},
		{"http://[::]:9001/deprovision", "berthd itself"},
		{"http://[::ffff:127.0.0.1]:9001/deprovision", "berthd itself"},
		{"http://127.0.0.1:9001/deprovision", "berthd itself"},
		{"http://127.9.9.9:9001/", "berthd itself"},
		{"http://10.1.2.3:9001/deprovision", "berthd itself"}, // a local interface
		{"http://[2001:db8::7]:9002/", "berthd itself"},       // a local v6 interface
	}
	for _, c := range cases {
		err := policy().CheckURL(c.raw)
		if err == nil {
			t.Errorf("CheckURL(%q) accepted, want refused (%s)", c.raw, c.want)
			continue
		}
		if !errors.Is(err, messages.ErrBadRequest) {
			t.Errorf("CheckURL(%q) = %v, not an ErrBadRequest", c.raw, err)
		}
		var r *messages.Refusal
		if !errors.As(err, &r) {
			t.Errorf("CheckURL(%q) = %v, not a Refusal (no tenant-safe message)", c.raw, err)
			continue
		}
		if !strings.Contains(r.Msg, c.want) {
			t.Errorf("CheckURL(%q) message %q, want it to mention %q", c.raw, r.Msg, c.want)
		}
		if strings.Contains(r.Msg, "9002") || strings.Contains(r.Msg, "169.254") {
			t.Errorf("CheckURL(%q) message %q echoes the input", c.raw, r.Msg)
		}
	}
}

func TestCheckURLField_NamesTheField(t *testing.T) {
	for _, raw := range []string{"gopher://x/", "http://169.254.169.254/", "http://127.0.0.1:9002/", "http://2852039166/", "http://x:0/"} {
		err := policy().CheckURLField("lifecycle_callback_url", raw)
		var r *messages.Refusal
		if !errors.As(err, &r) || !errors.Is(err, messages.ErrBadRequest) || !strings.HasPrefix(r.Msg, "lifecycle_callback_url ") {
			t.Errorf("CheckURLField(%q) = %v, want a bad-request refusal naming lifecycle_callback_url", raw, err)
		}
	}
	if err := policy().CheckURLField("callback_url", "https://fred.example/cb"); err != nil {
		t.Errorf("a good URL refused: %v", err)
	}
}

func TestCheckURL_DefaultPortsCountAsSelfPorts(t *testing.T) {
	p := callback.Policy{Self: []string{"127.0.0.1:80", "[::1]:443"}, Interfaces: policy().Interfaces}
	for _, raw := range []string{"http://127.0.0.1/", "http://localhost/x", "https://[::1]/", "https://127.0.0.1/"} {
		if p.CheckURL(raw) == nil {
			t.Errorf("CheckURL(%q) accepted although berthd listens on its default port", raw)
		}
	}
	if err := p.CheckURL("https://127.0.0.1:8443/"); err != nil {
		t.Errorf("another port refused: %v", err)
	}
}

func TestCheckURL_ExactSelfNameAndAddressRefused(t *testing.T) {
	p := callback.Policy{Self: []string{"berth.internal:9001", "192.0.2.44:9002"}, Interfaces: policy().Interfaces}
	for _, raw := range []string{"http://berth.internal:9001/", "http://BERTH.internal.:9001/", "http://192.0.2.44:9002/"} {
		if p.CheckURL(raw) == nil {
			t.Errorf("CheckURL(%q) accepted: it is exactly a listen address", raw)
		}
	}
	if err := p.CheckURL("http://berth.internal:9100/"); err != nil {
		t.Errorf("another port of the same name refused: %v", err)
	}
}

func TestCheckURL_UnlistableInterfacesRefuseOnlyOnSelfPorts(t *testing.T) {
	p := callback.Policy{Self: []string{":9001"}, Interfaces: func() ([]netip.Addr, error) { return nil, errors.New("boom") }}
	if p.CheckURL("http://192.0.2.10:9001/") == nil {
		t.Error("a Self port on an address that might be local was accepted although the interfaces are unknown")
	}
	if err := p.CheckURL("http://192.0.2.10:9100/"); err != nil {
		t.Errorf("a non-Self port refused: %v", err)
	}
}

func TestCheckURL_ZeroPolicyStillRefusesLinkLocalAndAmbiguousHosts(t *testing.T) {
	var p callback.Policy
	for _, raw := range []string{"http://169.254.169.254/", "http://2852039166/", "http://[fe80::1%25lo]/"} {
		if p.CheckURL(raw) == nil {
			t.Errorf("CheckURL(%q) accepted", raw)
		}
	}
	if err := p.CheckURL("http://127.0.0.1:9002/"); err != nil {
		t.Errorf("without Self every loopback port is a receiver: %v", err)
	}
}

func TestCheckDial_RefusesLinkLocalAndOwnListenersOnly(t *testing.T) {
	cases := []struct {
		addr    string
		refused bool
	}{
		{"169.254.169.254:80", true},
		{"[fe80::1%eth0]:80", true},
		{"[fe80::1]:80", true},
		{"[::ffff:169.254.1.1]:80", true},
		{"127.0.0.1:9002", true},
		{"127.0.0.2:9002", true},
		{"[::1]:9002", true},
		{"0.0.0.0:9002", true},
		{"[::]:9001", true},
		{"10.1.2.3:9001", true},
		{"[::ffff:127.0.0.1]:9001", true},
		{"127.0.0.1:9100", false},
		{"[::1]:9100", false},
		{"10.1.2.3:443", false},
		{"192.0.2.10:9001", false},
		{"[2001:db8::1]:9002", false},
	}
	p := policy()
	for _, c := range cases {
		err := p.CheckDial(c.addr)
		switch {
		case c.refused && err == nil:
			t.Errorf("CheckDial(%q) allowed", c.addr)
		case c.refused && !errors.Is(err, callback.ErrRefusedDial):
			t.Errorf("CheckDial(%q) = %v, not ErrRefusedDial", c.addr, err)
		case !c.refused && err != nil:
			t.Errorf("CheckDial(%q) = %v, want allowed", c.addr, err)
		}
	}
	if err := p.Control("tcp4", "127.0.0.1:9002", nil); !errors.Is(err, callback.ErrRefusedDial) {
		t.Errorf("Control = %v, want the CheckDial refusal", err)
	}
	if d := p.Dialer(); d.Control == nil {
		t.Error("Dialer has no Control function")
	}
}
