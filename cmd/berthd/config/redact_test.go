package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestRedacted_SecretsHidden_OtherValuesShown(t *testing.T) {
	c := mustLoad(t, "callback_secret: "+testSecret+"\ntenant_quota: {max_cpu_cores: 2}\n")
	r := c.Redacted()
	if r["callback_secret"] != "<redacted>" || r["callback_secret_next"] != "<unset>" {
		t.Fatalf("secrets: %v / %v", r["callback_secret"], r["callback_secret_next"])
	}
	if r["listen_addr"] != "127.0.0.1:9001" || r["image_pull_timeout"] != "5m0s" {
		t.Fatalf("plain values wrong: listen=%v pull=%v", r["listen_addr"], r["image_pull_timeout"])
	}
	if q, ok := r["tenant_quota"].(map[string]any); !ok || q["max_cpu_cores"] != 2.0 {
		t.Fatalf("tenant_quota = %#v", r["tenant_quota"])
	}
	if strings.Contains(fmt.Sprint(r), testSecret) {
		t.Fatal("Redacted output contains the secret")
	}
	encoded, err := json.Marshal(r)
	if err != nil || strings.Contains(string(encoded), testSecret) {
		t.Fatalf("JSON of Redacted leaks or fails: %v", err)
	}
}

func TestRedacted_CoversEverySchemaKey(t *testing.T) {
	r := mustLoad(t, "tenant_quota: {max_cpu_cores: 1}\n").Redacted() // unset, tenant_quota has no keys to show
	for _, key := range fixedKeys("", schema) {
		if _, ok := lookupPath(r, strings.Split(key, ".")); !ok {
			t.Errorf("Redacted lacks %s", key)
		}
	}
}

func TestRedacted_DebugToken_Hidden(t *testing.T) {
	c := mustLoad(t, "debug: {chaos: true, token: "+testDebugToken+"}\n")
	r := c.Redacted()
	if d, ok := r["debug"].(map[string]any); !ok || d["token"] != "<redacted>" || d["chaos"] != true {
		t.Fatalf("debug = %#v, want chaos true and the token redacted", r["debug"])
	}
	encoded, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(r), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), string(encoded)} {
		if strings.Contains(out, testDebugToken) {
			t.Fatalf("debug.token leaked in %q", out)
		}
	}
}

func TestConfig_PrintedOrMarshalled_NeverShowsSecrets(t *testing.T) {
	c := mustLoad(t, "callback_secret: "+testSecret+"\ncallback_secret_next: "+testSecretNext+"\n")
	encoded, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(*c), string(encoded)} {
		if strings.Contains(out, testSecret) || strings.Contains(out, testSecretNext) {
			t.Fatalf("secret leaked in %q", out)
		}
	}
	if string(c.CallbackSecret) != testSecret || string([]byte(c.CallbackSecretNext)) != testSecretNext {
		t.Fatal("the raw values are not reachable by conversion")
	}
}
