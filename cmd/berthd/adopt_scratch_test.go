package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Fred gives a diskless instance's writable paths a volume under the canonical
// name: the adopted lease keeps it while fred's container runs, its first
// relaunch seeds berthd's own scratch volume, and the close destroys both —
// nothing of the writable paths is retained or left.
func TestFredV013Host_ADisklessInstancesFredVolumeIsItsScratch_GoneAtClose(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	profiles := "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}"
	fred := startFredWith(t, "retain_on_close: true", profiles)
	ref := pushHostile(t, writablePathRootfs(t), "wp-fred-"+uuid.NewString()[:8])
	l := fred.provisionAs([]messages.LeaseItem{{SKU: "docker-micro", Quantity: 1}}, flatManifest(map[string]any{"image": ref}), cb.callbackURL())
	fred.waitFor(l, "/provisions/", `"status":"ready"`)
	fred.stop()
	fredVol := filepath.Join(fred.volumes, messages.VolumeName(l, "app", 0))
	if _, err := os.Stat(filepath.Join(fredVol, dockerio.WritableRoot)); err != nil {
		t.Fatalf("fred made no writable-path volume for the diskless instance: %v", err)
	}

	berth := fred.adoptInto([]string{"adopted 1 leases"}, profiles, "retain_on_close: true")
	berth.startInProcess()
	berth.waitStatus(l, messages.StatusReady, 30*time.Second)
	relaunchOntoBerthd(t, berth, l, 1)
	berth.deprovisionUntilGone(l)
	for _, name := range []string{messages.VolumeName(l, "app", 0), messages.ScratchVolumeName(l, "app", 0)} {
		if _, err := os.Stat(filepath.Join(fred.volumes, name)); !os.IsNotExist(err) {
			t.Fatalf("volume %s after the close: %v, want it gone", name, err)
		}
	}
	if list := berth.retentionList(); len(list) != 0 {
		t.Fatalf("retained %+v, want nothing: a diskless lease has nothing to keep", list)
	}
}
