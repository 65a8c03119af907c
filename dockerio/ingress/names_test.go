package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages/policy"
)

const (
	leaseA = "0123abcd-4567-4890-abcd-ef0123456789"
	leaseB = "0123abcd-4567-4890-abcd-ef0123456780"
)

func TestLabel_SeedRules_AtMost63AndDeterministic(t *testing.T) {
	long := strings.Repeat("s", 63)
	cases := []struct {
		name, lease, service string
		index                int
		want                 string
	}{
		{"flat lease, one instance", leaseA, "app", 0, "app-0-0123abcd45674890abcdef0123456789"},
		{"stack service, third instance", leaseA, "web", 2, "web-2-0123abcd45674890abcdef0123456789"},
		{"service that just fits", leaseA, strings.Repeat("a", 28), 0, strings.Repeat("a", 28) + "-0-0123abcd45674890abcdef0123456789"},
		{"63-char service is cut and hashed", leaseA, long, 0, strings.Repeat("s", 21) + "-" + hash6(long) + "-0-0123abcd45674890abcdef0123456789"},
		{"cut never leaves a hyphen before the hash", leaseA, strings.Repeat("a", 20) + "-" + strings.Repeat("b", 20), 0,
			strings.Repeat("a", 20) + "-" + hash6(strings.Repeat("a", 20)+"-"+strings.Repeat("b", 20)) + "-0-0123abcd45674890abcdef0123456789"},
		{"index 1023 of a long service", leaseA, long, 1023, strings.Repeat("s", 18) + "-" + hash6(long) + "-1023-0123abcd45674890abcdef0123456789"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Label(c.lease, c.service, c.index)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("Label = %s, want %s", got, c.want)
			}
			if _, err := policy.ValidateCustomDomain(got+".example.org", ""); len(got) > MaxLabel || err != nil {
				t.Fatalf("%s (%d chars) is not a valid DNS label: %v", got, len(got), err)
			}
			again, _ := Label(c.lease, c.service, c.index)
			if again != got {
				t.Fatal("not deterministic")
			}
		})
	}
}

// hash6 is the first 6 hex digits of the name's SHA-256.
func hash6(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:6]
}

func TestLabel_BadInput_Refused(t *testing.T) {
	for _, c := range []struct {
		lease, service string
		index          int
	}{
		{"not-a-uuid", "app", 0},
		{strings.ToUpper(leaseA), "app", 0},
		{leaseA, "Web", 0},
		{leaseA, "-web", 0},
		{leaseA, strings.Repeat("a", 64), 0},
		{leaseA, "app", -1},
		{leaseA, "app", 100000},
	} {
		if got, err := Label(c.lease, c.service, c.index); err == nil {
			t.Errorf("Label(%q, %q, %d) = %s, want an error", c.lease, c.service, c.index, got)
		}
	}
}

func TestLeaseFQDNs_EveryContainerUniqueAcrossServicesAndLeases(t *testing.T) {
	long1 := strings.Repeat("x", 40) + "-one"
	long2 := strings.Repeat("x", 40) + "-two" // same first 18+ characters
	all := map[string]string{}
	for _, lease := range []string{leaseA, leaseB} {
		names, err := LeaseFQDNs(lease, map[string]int{"app": 1, "web": 3, long1: 2, long2: 2, "web-1": 2}, "Apps.Example.com.")
		if err != nil {
			t.Fatal(err)
		}
		for svc, list := range names {
			for i, n := range list {
				if !strings.HasSuffix(n, ".apps.example.com") {
					t.Fatalf("%s not under the wildcard domain", n)
				}
				if l := strings.SplitN(n, ".", 2)[0]; len(l) > MaxLabel {
					t.Fatalf("%s: label of %d", n, len(l))
				}
				if prev, dup := all[n]; dup {
					t.Fatalf("%s/%d of %s shares %s with %s", svc, i, lease, n, prev)
				}
				all[n] = lease + "/" + svc
			}
		}
	}
	if len(all) != 2*10 {
		t.Fatalf("%d names, want 20", len(all))
	}
}

func TestFQDN_TooLongForTheWildcard_Refused(t *testing.T) {
	wildcard := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + "." + strings.Repeat("d", 30) + ".com" // 217
	if _, err := FQDN(leaseA, "app", 0, wildcard); err == nil || !strings.Contains(err.Error(), "longer than 253") {
		t.Fatalf("err %v, want longer than 253", err)
	}
}
