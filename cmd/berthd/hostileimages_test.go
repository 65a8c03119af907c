package main

// Hostile images through berthd (issue 17): metadata that breaks an admission
// limit is refused with the rule it broke and nothing is created; content
// built to make seeding write outside its tree (a writable path that is a
// symlink to /etc, entries climbing out with ..) is confined.

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// tarOf is a tar of the entries; a regular file's content is its Linkname.
func tarOf(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			h.Linkname, h.Size = "", int64(len(body))
		} else {
			body = nil
		}
		h.Mode = max(h.Mode, 0o755)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileRootfs is the test workload (serving on 8080 as app, uid 1000) with
// directories and links built to mislead detection and seeding.
func hostileRootfs(t *testing.T) []byte {
	return tarOf(t,
		tar.Header{Name: "etc/", Typeflag: tar.TypeDir},
		tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Linkname: "root:x:0:0::/:/x\napp:x:1000:1000::/:/x\n", Mode: 0o644},
		tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Linkname: "root:x:0:\napp:x:1000:\n", Mode: 0o644},
		tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		tar.Header{Name: "run/", Typeflag: tar.TypeDir},
		tar.Header{Name: "workload", Typeflag: tar.TypeReg, Linkname: string(buildWorkloadBinary(t))},
		tar.Header{Name: "var/lib/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/app/", Typeflag: tar.TypeDir, Uid: 1000, Gid: 1000},
		tar.Header{Name: "var/lib/app/etc", Typeflag: tar.TypeSymlink, Linkname: "/etc", Uid: 1000},
		tar.Header{Name: "var/lib/app/up", Typeflag: tar.TypeSymlink, Linkname: "../../..", Uid: 1000},
		tar.Header{Name: "var/lib/app/../../../escape", Typeflag: tar.TypeReg, Linkname: "x"},
		tar.Header{Name: "var/lib/evil", Typeflag: tar.TypeSymlink, Linkname: "/etc", Uid: 1000},
		tar.Header{Name: "var/log/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/log/app/", Typeflag: tar.TypeDir, Uid: 1000, Gid: 1000},
	)
}

// pushHostile imports rootfs with changes as the local registry's
// berth/hostile:<tag> and pushes it; the local copy is removed at cleanup.
func pushHostile(t *testing.T, rootfs []byte, tag string, changes ...string) string {
	t.Helper()
	dc := dockerClient(t)
	ref := os.Getenv("BERTH_TEST_REGISTRY")
	if ref == "" {
		ref = "127.0.0.1:5000"
	}
	ref += "/berth/hostile:" + tag
	changes = append([]string{`ENTRYPOINT ["/workload"]`, `CMD ["serve"]`, "USER app"}, changes...)
	rc, err := dc.ImageImport(context.Background(), image.ImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	rc.Close()
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
	if out, err := exec.Command("docker", "push", ref).CombinedOutput(); err != nil {
		t.Fatalf("push %s: %v\n%s", ref, err, out)
	}
	return ref
}

func TestHostileImage_MetadataRefusedWithItsRuleNothingCreated(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	rootfs := hostileRootfs(t)
	vols := make([]string, 17)
	for i := range vols {
		vols[i] = fmt.Sprintf("VOLUME /v%d", i)
	}
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t)
	var leases []string
	for _, c := range []struct {
		tag, why string
		changes  []string
	}{
		{"17volumes", "it declares 17 VOLUMEs", vols},
		{"overlapping", "overlap", []string{"VOLUME /a", "VOLUME /a/b"}},
		{"masking", "/proc", []string{"VOLUME /proc/sys"}},
		{"reserved-label", `"traefik.enable" is in a reserved namespace`, []string{"LABEL traefik.enable=true"}},
	} {
		ref := pushHostile(t, rootfs, c.tag, c.changes...)
		lease := uuid.NewString()
		if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "small", Quantity: 1}); r.Status != 202 {
			t.Fatalf("%s: provision: %d %s", c.tag, r.Status, r.Body)
		}
		// The callback says ImagePullFailed; the lease's message names the rule.
		if got := cb.waitFor(lease, 1, 2*time.Minute)[0].Body; got.Status != messages.CallbackFailed ||
			!strings.HasPrefix(got.Error, messages.ReasonImagePullFailed) {
			t.Errorf("%s: callback %+v, want failed ImagePullFailed", c.tag, got)
		}
		info := d.waitStatus(lease, "failed", 10*time.Second)
		t.Logf("%s: %s", c.tag, info.Message)
		if !strings.HasPrefix(info.Message, "image metadata is not admissible: ") || !strings.Contains(info.Message, c.why) {
			t.Errorf("%s: message %q, want the rule naming %q", c.tag, info.Message, c.why)
		}
		if cs := leaseContainers(t, dc, lease); len(cs) != 0 {
			t.Errorf("%s: a refused image left %d containers", c.tag, len(cs))
		}
		leases = append(leases, lease)
	}
	if vs := managedVolumes(t, root); len(vs) != 0 {
		t.Errorf("refused images left volumes %v", vs)
	}
	d.closeAll(dc, leases...)
}

func TestHostileImage_SymlinkAndDotDotConfined_ServesNothingWrittenOutside(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	ref := pushHostile(t, hostileRootfs(t), "confined")
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t)
	lease := stockProvision(t, d, cb, flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "diskless", Quantity: 1})
	ins := runningContainer(t, dc, lease)
	var mounted []string
	for _, m := range ins.Mounts {
		mounted = append(mounted, m.Destination)
	}
	t.Logf("mounts: %v", mounted)
	if !strings.Contains(strings.Join(mounted, " "), "/var/lib/app") || strings.Contains(strings.Join(mounted, " "), "/var/lib/evil") {
		t.Fatalf("mounts %v: want the seeded /var/lib/app and never the symlink /var/lib/evil", mounted)
	}
	// Through the links the tenant reaches only its own read-only rootfs.
	hp := hostPort(t, d, lease, "app", 0)
	for _, p := range []string{"/var/lib/evil/berth-escape", "/var/lib/app/etc/berth-escape", "/var/lib/app/up/berth-escape"} {
		if code, _ := putFile(t, hp, p, []byte("x")); code < 300 {
			t.Errorf("PUT %s succeeded", p)
		}
	}
	for _, p := range []string{"/etc/berth-escape", "/berth-escape"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	// The seeded tree holds the image's entries as they are, links unfollowed.
	var seeded []string
	_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "_wp") {
			rel, _ := filepath.Rel(root, p)
			seeded = append(seeded, rel[strings.Index(rel, "_wp"):])
		}
		return nil
	})
	t.Logf("seeded: %v", seeded)
	for _, want := range []string{"_wp/var%2Flib%2Fapp/etc", "_wp/var%2Flib%2Fapp/up"} {
		if !strings.Contains(strings.Join(seeded, " "), want) {
			t.Errorf("seeded %v lacks %s", seeded, want)
		}
	}
	assertNotDegraded(t, d, lease)
	d.closeAll(dc, lease)
	if vs := managedVolumes(t, root); len(vs) != 0 {
		t.Errorf("close left volumes %v", vs)
	}
}
