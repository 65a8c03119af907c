package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/messages"
)

// An adoption killed (SIGKILL) anywhere leaves either the whole store, its
// marker last, or no marker — never a half store berthd would serve; fred's
// files and containers are untouched either way; removing the data dir and
// running it again completes it. The kills are spread over the adoption's own
// duration, measured first (which stages they hit is logged: it is timing).
func TestFredV013Host_AnAdoptionKilledAnywhereLeavesAWholeStoreOrNone(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	fred := startFred(t)
	live := fred.provisionAs([]messages.LeaseItem{{SKU: "docker-micro", Quantity: 1}}, flatManifest(nil), cb.callbackURL())
	failed := fred.provisionAs([]messages.LeaseItem{{SKU: "docker-micro", Quantity: 1}},
		flatManifest(map[string]any{"command": []string{"/workload", "exit", "-code", "3", "-after", "300ms"}}), cb.callbackURL())
	fred.waitFor(live, "/provisions/", `"status":"ready"`)
	fred.waitFor(failed, "/provisions/", `"status":"failed"`)
	fred.stop()
	lives := containerLives(t, fred.name)
	files, err := takeover.FileHashes(fred.dir)
	if err != nil {
		t.Fatal(err)
	}
	berth := newDaemonDir(t, "name: "+fred.name, "listen_addr: "+fred.api, "volume_data_path: "+fred.volumes,
		"volume_mount_path: "+os.Getenv("BERTH_TEST_BTRFS"), "volume_filesystem: btrfs",
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}", fredTotals)
	berth.api = fred.api
	data := filepath.Join(berth.dir, "data")
	adopt := func(killAfter time.Duration) (exited bool, out string) {
		cmd := exec.Command(os.Args[0], "-config", berth.cfgPath, "-initialize-storage-identity", "adopt", "-v013-dir", fred.dir)
		cmd.Env = append(os.Environ(), "BERTH_TEST_AS_DAEMON=1", "GORACE=atexit_sleep_ms=0")
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if killAfter > 0 {
			select {
			case err := <-done:
				return err == nil, log.String()
			case <-time.After(killAfter):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return false, log.String()
			}
		}
		if err := <-done; err != nil {
			t.Fatalf("adopt: %v\n%s", err, log.String())
		}
		return true, log.String()
	}
	marked := func() bool { _, err := os.Stat(filepath.Join(data, "storage-identity")); return err == nil }

	began := time.Now()
	if ok, out := adopt(0); !ok || !strings.Contains(out, "adopted 1 leases") {
		t.Fatalf("adopt: %s", out)
	}
	took := time.Since(began)
	t.Logf("an adoption takes %s here", took)
	outcomes := map[string]int{}
	for i := 1; i <= 16; i++ { // from a tenth of its duration to 1.6 times it
		if err := os.RemoveAll(data); err != nil {
			t.Fatal(err)
		}
		finished, out := adopt(took * time.Duration(i) / 10)
		switch {
		case marked():
			outcomes["whole"]++
			// A marker is published last: the store under it is whole.
			if code, out := runOnce(t, "-config", berth.cfgPath, "-initialize-storage-identity", "adopt", "-v013-dir", fred.dir); code == 0 {
				t.Fatalf("adopt over a finished adoption: exit 0\n%s", out)
			}
		case finished:
			t.Fatalf("adopt exited 0 without its marker:\n%s", out)
		default:
			outcomes["no marker"]++
			// No marker: a daemon refuses to run on what it left, whatever that is.
			if _, err := os.Stat(filepath.Join(data, "state.db")); err == nil {
				outcomes["state.db without marker"]++
				if code, out := runOnce(t, "-config", berth.cfgPath); code == 0 || !strings.Contains(out, "marker") {
					t.Fatalf("berthd on an interrupted adoption's state.db: exit %d\n%s", code, out)
				}
			}
		}
		if now := containerLives(t, fred.name); now != lives {
			t.Fatalf("kill %d changed fred's containers:\nbefore:\n%s\nafter:\n%s", i, lives, now)
		}
		if now, _ := takeover.FileHashes(fred.dir); !equalMaps(now, files) {
			t.Fatalf("kill %d changed fred's files", i)
		}
	}
	t.Logf("kills: %v", outcomes)

	// Run again over a fresh data dir: whole, and served.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if ok, out := adopt(0); !ok {
		t.Fatalf("adopt after the kills: %s", out)
	}
	berth.startInProcess()
	berth.waitStatus(live, messages.StatusReady, 30*time.Second)
	if info := berth.provisionInfo(failed); info.Status != messages.StatusFailed || info.FailCount != 1 {
		t.Fatalf("the diagnostics-only lease after the kills: %+v", info)
	}
	if now := containerLives(t, fred.name); now != lives {
		t.Fatalf("fred's containers changed:\nbefore:\n%s\nafter:\n%s", lives, now)
	}
	berth.deprovisionUntilGone(live)
}
