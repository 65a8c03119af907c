package config

import (
	"reflect"
	"testing"
)

// A Fred host's environment configures berthd: every DOCKER_BACKEND_<KEY> is
// read as BERTH_<KEY> (DOCKER_BACKEND_ADDR as listen_addr), DOCKER_HOST as
// docker_host, and each alias is noticed once.
func TestLoad_DockerBackendAliases_ReadAsTheirKeys_NoticedOnceEach(t *testing.T) {
	c := mustLoad(t, "", "DOCKER_BACKEND_MAX_REQUEST_BODY_SIZE=4096", "DOCKER_BACKEND_ADDR=127.0.0.1:9101",
		"DOCKER_BACKEND_CALLBACK_SECRET="+testSecret, "DOCKER_BACKEND_HOST_ADDRESS=203.0.113.9",
		"DOCKER_BACKEND_DEBUG__TOKEN="+testDebugToken, "DOCKER_HOST=unix:///run/user/1000/docker.sock")
	if c.MaxRequestBodySize != 4096 || c.ListenAddr != "127.0.0.1:9101" || string(c.CallbackSecret) != testSecret ||
		c.HostAddress != "203.0.113.9" || string(c.Debug.Token) != testDebugToken || c.DockerHost != "unix:///run/user/1000/docker.sock" {
		t.Fatalf("aliases not read: %+v", c)
	}
	want := []string{
		"DOCKER_BACKEND_ADDR: read as listen_addr (BERTH_LISTEN_ADDR wins when both are set)",
		"DOCKER_BACKEND_CALLBACK_SECRET: read as callback_secret (BERTH_CALLBACK_SECRET wins when both are set)",
		"DOCKER_BACKEND_DEBUG__TOKEN: read as debug.token (BERTH_DEBUG__TOKEN wins when both are set)",
		"DOCKER_BACKEND_HOST_ADDRESS: read as host_address (BERTH_HOST_ADDRESS wins when both are set)",
		"DOCKER_BACKEND_MAX_REQUEST_BODY_SIZE: read as max_request_body_size (BERTH_MAX_REQUEST_BODY_SIZE wins when both are set)",
		"DOCKER_HOST: read as docker_host (BERTH_DOCKER_HOST wins when both are set)",
	}
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Fatalf("notices:\n got %q\nwant %q", c.Warnings, want)
	}
}

// BERTH_* wins over its alias, and the ignored alias is named; an alias also
// counts as the operator's (production_mode takes host_address from it).
func TestLoad_BerthWinsOverItsAlias_TheAliasNoticedAsIgnored(t *testing.T) {
	c := mustLoad(t, prodBase, "BERTH_LISTEN_ADDR=0.0.0.0:9201", "DOCKER_BACKEND_LISTEN_ADDR=0.0.0.0:9301",
		"DOCKER_BACKEND_DOCKER_HOST=unix:///run/a.sock", "DOCKER_HOST=unix:///run/b.sock",
		"DOCKER_BACKEND_HOST_ADDRESS=node1.example.com")
	if c.ListenAddr != "0.0.0.0:9201" || c.DockerHost != "unix:///run/a.sock" || c.HostAddress != "node1.example.com" {
		t.Fatalf("listen_addr %q docker_host %q host_address %q", c.ListenAddr, c.DockerHost, c.HostAddress)
	}
	for _, notice := range []string{
		"DOCKER_BACKEND_LISTEN_ADDR: ignored: BERTH_LISTEN_ADDR is set too and wins",
		"DOCKER_HOST: ignored: DOCKER_BACKEND_DOCKER_HOST is set too and wins",
	} {
		if findProblem(c.Warnings, notice) == "" {
			t.Errorf("no notice %q in %q", notice, c.Warnings)
		}
	}
	if _, err := loadYAML(t, "production_mode: true\ncallback_secret: "+testSecret+"\n"+diskless+noVolumes,
		"DOCKER_BACKEND_HOST_ADDRESS=203.0.113.7"); err != nil {
		t.Fatalf("production host_address from its alias: %v", err)
	}
}

// An alias that names no key is warned about like an unknown BERTH_* variable,
// and an invalid aliased value is refused like the key's own.
func TestLoad_UnknownOrInvalidAlias_WarnedOrRefusedLikeBerth(t *testing.T) {
	c := mustLoad(t, "", "DOCKER_BACKEND_NO_SUCH_KEY=1")
	if findProblem(c.Warnings, "DOCKER_BACKEND_NO_SUCH_KEY: names no configuration key; ignored") == "" {
		t.Fatalf("warnings %q", c.Warnings)
	}
	if list := problemsOf(t, "", "DOCKER_BACKEND_ADDR=nonsense"); findProblem(list, "listen_addr:") == "" {
		t.Fatalf("problems %q", list)
	}
}
