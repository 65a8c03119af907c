package engine

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-dev/berth/dockerio"
)

// Pure parts of writable paths, seeding and the seccomp profile: no Docker.

// The allow rules' union is every 32-bit request but the refused ones, for
// any high bits of the 64-bit register (the comparisons mask them off).
func TestIoctlCover_EverythingButTheRefusedRequests(t *testing.T) {
	cover := ioctlCover(refusedIoctls)
	if len(cover) != 39 {
		t.Errorf("%d rules, want 39 for the four btrfs requests", len(cover))
	}
	allowed := func(req uint64) bool {
		return slices.ContainsFunc(cover, func(c maskedValue) bool { return uint32(req)&c.mask == c.value })
	}
	probes := []uint64{0, 0xffffffff, 0x541b /* FIONREAD */, 0x5401 /* TCGETS */, 0x5421 /* FIONBIO */, 0x80089419 /* BTRFS_IOC_SUBVOL_GETFLAGS */}
	for _, v := range refusedIoctls {
		for bit := range 32 {
			probes = append(probes, uint64(v^1<<bit))
		}
		probes = append(probes, uint64(v)+1, uint64(v)-1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		probes = append(probes, uint64(r.Uint32()))
	}
	for _, p := range probes {
		if refused := slices.Contains(refusedIoctls, uint32(p)); allowed(p) == refused {
			t.Fatalf("request %#x: allowed %v, refused %v", p, allowed(p), refused)
		}
	}
	for _, v := range refusedIoctls {
		if allowed(0xffffffff00000000 | uint64(v)) {
			t.Errorf("%#x with high bits set is allowed", v)
		}
	}
}

// The profile is Docker's default one with ioctl only under the cover's
// masked rules, marshalled once and named by its digest.
func TestTenantProfile_IoctlOnlyUnderTheCover(t *testing.T) {
	var p struct {
		DefaultAction   specs.LinuxSeccompAction `json:"defaultAction"`
		DefaultErrnoRet *uint                    `json:"defaultErrnoRet"`
		Syscalls        []struct {
			Names  []string                 `json:"names"`
			Action specs.LinuxSeccompAction `json:"action"`
			Args   []specs.LinuxSeccompArg  `json:"args"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(tenantSeccomp().json), &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(syscall.EPERM) {
		t.Errorf("default %s errno %v, want errno EPERM", p.DefaultAction, p.DefaultErrnoRet)
	}
	rules, others := 0, 0
	for _, s := range p.Syscalls {
		if !slices.Contains(s.Names, "ioctl") {
			others += len(s.Names)
			continue
		}
		rules++
		if len(s.Names) != 1 || s.Action != specs.ActAllow || len(s.Args) != 1 || s.Args[0].Op != specs.OpMaskedEqual || s.Args[0].Index != 1 {
			t.Errorf("ioctl rule %+v, want one masked comparison of the request", s)
		}
	}
	if rules != 39 || others < 300 {
		t.Errorf("%d ioctl rules, %d other syscall names", rules, others)
	}
	if !strings.HasPrefix(tenantSeccompOpt(), seccompMarkerKey+"=") || tenantSeccompOpt() != tenantSeccomp().marker {
		t.Errorf("marker %q", tenantSeccompOpt())
	}
}

func TestProgramName_EntrypointElseCommandOverridesFirst(t *testing.T) {
	for _, c := range []struct {
		entry, cmd, command, args []string
		want                      string
	}{
		{nil, []string{"nginx", "-g", "daemon off;"}, nil, nil, "nginx"},
		{nil, []string{"redis-server"}, nil, nil, "redis-server"},
		{[]string{"/usr/local/bin/docker-entrypoint.sh"}, []string{"postgres"}, nil, nil, "docker-entrypoint.sh"},
		{[]string{"/entry"}, []string{"x"}, []string{"/usr/sbin/nginx"}, nil, "nginx"},
		{nil, []string{"nginx"}, nil, []string{"/usr/bin/redis-server"}, "redis-server"},
		{[]string{"/entry"}, nil, []string{}, []string{"/bin/app"}, "app"},
		{nil, nil, nil, nil, ""},
	} {
		if got := programName(c.entry, c.cmd, c.command, c.args); got != c.want {
			t.Errorf("programName(%v, %v, %v, %v) = %q, want %q", c.entry, c.cmd, c.command, c.args, got, c.want)
		}
	}
	if got := programNames("redis-server"); !slices.Equal(got, []string{"redis-server", "redis"}) {
		t.Errorf("programNames(redis-server) = %v", got)
	}
	if got := programNames("sh"); len(got) != 0 {
		t.Errorf("programNames(sh) = %v, want none (under 3 bytes)", got)
	}
}

func TestMatchWritable_OwnerAndProgramRulesRefusalsAndTheLimit(t *testing.T) {
	scan := imageScan{cut: []string{"/opt"}, entries: []scanEntry{
		{path: "/var/lib/apt", uid: 0, isDir: true},
		{path: "/var/lib/nginx", uid: 0, isDir: true},                   // program name
		{path: "/var/lib/redis", uid: 100, isDir: true},                 // owner
		{path: "/var/lib/evil", uid: 100, isLink: true, linkTo: "/etc"}, // a symlink
		{path: "/var/lib/state", uid: 100, isDir: false},                // a file
		{path: "/var/log/nginx", uid: 0, isDir: true},
		{path: "/var/log/redis", uid: 100, isDir: true},
		{path: "/data/db", uid: 100, isDir: true},       // under a VOLUME
		{path: "/var/cache/x:y", uid: 100, isDir: true}, // unusable name
		{path: "/home/redis", uid: 100, isDir: true},
		{path: "/srv/redis", uid: 100, isDir: true}, // the fifth
	}}
	w := matchWritable(scan, 100, "nginx", []string{"/data"}, []string{"/home/redis"})
	if want := []string{"/var/lib/nginx", "/var/lib/redis", "/var/log/nginx", "/var/log/redis"}; !slices.Equal(w.Paths, want) {
		t.Errorf("paths %v, want %v", w.Paths, want)
	}
	if !slices.Equal(w.Dropped, []string{"/srv/redis"}) || !slices.Equal(w.Cut, []string{"/opt"}) || w.Program != "nginx" {
		t.Errorf("dropped %v cut %v program %q", w.Dropped, w.Cut, w.Program)
	}
	if len(w.Refused) != 4 || !strings.Contains(w.Refused[0], `/var/lib/evil: a symlink to "/etc"`) ||
		!strings.Contains(w.Refused[1], "/data/db: over or under /data") || !strings.Contains(w.Refused[2], "cannot carry") ||
		!strings.Contains(w.Refused[3], "/home/redis: over or under /home/redis") {
		t.Errorf("refused %q", w.Refused)
	}
	// As root: any non-root owner matches; as an unrelated user only the name rule.
	if w := matchWritable(imageScan{entries: scan.entries[:3]}, 0, "", nil, nil); !slices.Equal(w.Paths, []string{"/var/lib/redis"}) {
		t.Errorf("as root: %v", w.Paths)
	}
	if w := matchWritable(imageScan{entries: scan.entries[:3]}, 33, "nginx", nil, nil); !slices.Equal(w.Paths, []string{"/var/lib/nginx"}) {
		t.Errorf("as 33 running nginx: %v", w.Paths)
	}
}

// tarOf builds an archive of entries; a Typeflag of 0 is a regular file with body.
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
		if h.Mode == 0 {
			h.Mode = 0o755
		}
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

func TestReadScan_DepthOneEntriesOfTheParentsInParentOrderAndBounds(t *testing.T) {
	archive := tarOf(t,
		tar.Header{Name: "var/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/cache/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/cache/c/", Typeflag: tar.TypeDir, Uid: 5},
		tar.Header{Name: "var/lib/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/apt/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/apt/lists/", Typeflag: tar.TypeDir, Uid: 7},
		tar.Header{Name: "var/lib/link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "var/lib/nginx/", Typeflag: tar.TypeDir, Uid: 33},
		tar.Header{Name: "var/mail/m/", Typeflag: tar.TypeDir, Uid: 8},
	)
	got, cut, err := readScan(bytes.NewReader(archive), "/var", nil, 100, 1<<20)
	want := []scanEntry{{path: "/var/lib/apt", isDir: true}, {path: "/var/lib/link", isLink: true, linkTo: "/etc"},
		{path: "/var/lib/nginx", uid: 33, isDir: true}, {path: "/var/cache/c", uid: 5, isDir: true}}
	if err != nil || cut || !slices.Equal(got, want) {
		t.Fatalf("readScan = %+v, cut %v, %v\nwant %+v", got, cut, err, want)
	}
	if got, _, _ := readScan(bytes.NewReader(archive), "/var", []string{"/var/cache"}, 100, 1<<20); len(got) != 3 {
		t.Errorf("with VOLUME /var/cache: %+v", got)
	}
	if got, cut, _ := readScan(bytes.NewReader(archive), "/var", nil, 5, 1<<20); !cut || len(got) != 2 {
		t.Errorf("entry bound: %+v cut %v", got, cut)
	}
	if got, cut, _ := readScan(bytes.NewReader(archive), "/var", nil, 100, 2000); !cut || len(got) != 1 {
		t.Errorf("byte bound: %+v cut %v", got, cut)
	}
}

// extractInto extracts archive (of directory "app") into a fresh dst/top and
// returns what it said.
func extractInto(t *testing.T, dir string, archive []byte, maxEntries int, maxBytes int64) error {
	t.Helper()
	top := filepath.Join(dir, "top")
	if err := os.Mkdir(top, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	return extract(tar.NewReader(bytes.NewReader(archive)), root, "app", 33, 34,
		&seedBudget{entries: maxEntries, maxEntries: maxEntries, bytes: maxBytes, maxBytes: maxBytes})
}

func TestExtract_ImageOwnershipModesAndTheMountPointsOwner(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	archive := tarOf(t,
		tar.Header{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o2750},
		tar.Header{Name: "app/sub/", Typeflag: tar.TypeDir, Mode: 0o700, Uid: 100, Gid: 101},
		tar.Header{Name: "app/sub/f", Typeflag: tar.TypeReg, Linkname: "hello", Mode: 0o4755, Uid: 100, Gid: 101},
		tar.Header{Name: "app/access.log", Typeflag: tar.TypeSymlink, Linkname: "/dev/stdout"},
		tar.Header{Name: "app/hard", Typeflag: tar.TypeLink, Linkname: "app/sub/f"},
		tar.Header{Name: "app/fifo", Typeflag: tar.TypeFifo},
	)
	if err := extractInto(t, dir, archive, 100, 1000); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(dir, "top")
	check := func(rel string, mode fs.FileMode, uid, gid int) {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(top, rel))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != mode || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: %v %d:%d, want %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid, mode, uid, gid)
		}
	}
	check(".", fs.ModeDir|fs.ModeSetgid|0o750, 33, 34) // the mount point: the container's user
	check("sub", fs.ModeDir|0o700, 100, 101)
	check("sub/f", 0o755, 100, 101) // setuid dropped
	if l, err := os.Readlink(filepath.Join(top, "access.log")); err != nil || l != "/dev/stdout" {
		t.Errorf("symlink: %q, %v", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(top, "hard")); err != nil || string(b) != "hello" {
		t.Errorf("hard link: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(top, "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("fifo made on the host: %v", err)
	}
}

// A hostile archive is refused with a reason, and nothing lands outside the
// target directory.
func TestExtract_HostileArchivesConfined(t *testing.T) {
	requireRoot(t)
	for name, c := range map[string]struct {
		entries []tar.Header
		why     string
	}{
		"dotdot":   {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "app/../escape", Typeflag: tar.TypeReg, Linkname: "x"}}, "not a clean path"},
		"absolute": {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "/escape", Typeflag: tar.TypeReg, Linkname: "x"}}, "not a clean path"},
		"outside":  {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "other/escape", Typeflag: tar.TypeReg, Linkname: "x"}}, "not a clean path"},
		"symlink then file": {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir},
			{Name: "app/link", Typeflag: tar.TypeSymlink, Linkname: "../.."}, {Name: "app/link/escape", Typeflag: tar.TypeReg, Linkname: "x"}}, "escapes"},
		"symlink to abs then file": {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir},
			{Name: "app/link", Typeflag: tar.TypeSymlink, Linkname: "OUTSIDE"}, {Name: "app/link/escape", Typeflag: tar.TypeReg, Linkname: "x"}}, "escapes"},
		"over a symlink": {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir},
			{Name: "app/f", Typeflag: tar.TypeSymlink, Linkname: "OUTSIDE/escape"}, {Name: "app/f", Typeflag: tar.TypeReg, Linkname: "x"}}, "exists"},
		"hard link out": {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "app/h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}, "outside the directory"},
		"too many":      {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "app/a", Typeflag: tar.TypeDir}, {Name: "app/b", Typeflag: tar.TypeDir}, {Name: "app/c", Typeflag: tar.TypeDir}}, "more than 3 entries"},
		"too big":       {[]tar.Header{{Name: "app/", Typeflag: tar.TypeDir}, {Name: "app/a", Typeflag: tar.TypeReg, Linkname: strings.Repeat("x", 11)}}, "more than 10 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			outside := filepath.Join(dir, "outside")
			if err := os.Mkdir(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			for i := range c.entries {
				c.entries[i].Linkname = strings.ReplaceAll(c.entries[i].Linkname, "OUTSIDE", outside)
			}
			err := extractInto(t, dir, tarOf(t, c.entries...), 3, 10)
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("extract = %v, want an error saying %q", err, c.why)
			}
			for _, p := range []string{filepath.Join(dir, "escape"), filepath.Join(outside, "escape"), filepath.Join(dir, "other")} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s exists outside the target", p)
				}
			}
		})
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: extraction keeps the image's owners, which needs root (CAP_CHOWN)")
	}
}

// Writable paths mount under a read-only rootfs only: from the instance's
// seeded _wp tree, else as a tmpfs given to the container's user, like /tmp
// and /run; the lease mount budget counts the worst case either way.
func TestBuildProject_WritablePathsSeededOrTmpfsOwnedByTheUser(t *testing.T) {
	svc := unitService("web", 2)
	svc.UID, svc.GID = 33, 33
	svc.WritablePaths = []string{"/var/lib/nginx", "/var/log/nginx"}
	svc.WritableDirs = []string{"/vols/fred-scratch-L-web-0", "/vols/fred-scratch-L-web-1"}
	p, err := buildProject(unitPlan(svc), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeMounts(p.Services["web-1"]), []string{
		"tmpfs:/run@4+33:33", "tmpfs:/tmp@4+33:33",
		"bind:/var/lib/nginx<-/vols/fred-scratch-L-web-1/_wp/var%2Flib%2Fnginx(rprivate,create=false,ro=false)",
		"bind:/var/log/nginx<-/vols/fred-scratch-L-web-1/_wp/var%2Flog%2Fnginx(rprivate,create=false,ro=false)",
	}; !slices.Equal(got, want) {
		t.Errorf("seeded: %v\nwant %v", got, want)
	}
	svc.WritableDirs = nil
	p, err = buildProject(unitPlan(svc), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeMounts(p.Services["web-0"]), []string{"tmpfs:/run@4+33:33", "tmpfs:/tmp@4+33:33", "tmpfs:/var/lib/nginx@4+33:33", "tmpfs:/var/log/nginx@4+33:33"}; !slices.Equal(got, want) {
		t.Errorf("tmpfs: %v, want %v", got, want)
	}
	writable := unitPlan(svc)
	writable.ReadonlyRootfs = false
	if p, err = buildProject(writable, time.Now()); err != nil || len(describeMounts(p.Services["web-0"])) != 0 {
		t.Errorf("writable rootfs: %v, %v; want no mounts", describeMounts(p.Services["web-0"]), err)
	}
	over := svc
	over.WritablePaths = []string{"/run/nginx"}
	if _, err := buildProject(unitPlan(over), time.Now()); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("a writable path under /run: %v", err)
	}
	big := unitService("big", 631) // 26 mounts an instance: 631 × 26 > 16,384
	big.ImageVolumes = []string{"/v0", "/v1", "/v2", "/v3", "/v4", "/v5", "/v6", "/v7", "/v8", "/v9", "/va", "/vb", "/vc", "/vd", "/ve", "/vf"}
	big.Tmpfs = []string{"/t0", "/t1", "/t2", "/t3"}
	if _, err := buildProject(unitPlan(big), time.Now()); !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), "16384") {
		t.Errorf("631 instances of 26 mounts: %v", err)
	}
	big.Quantity = 630
	if _, err := buildProject(unitPlan(big), time.Now()); err != nil {
		t.Errorf("630 instances of 26 mounts: %v", err)
	}
}
