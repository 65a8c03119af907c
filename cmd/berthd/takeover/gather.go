package takeover

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/volumes"
	"github.com/berth-dev/berth/persistence/fredv013"
)

// Refusals of what the preflight could not read.
const (
	DockerUnavailable = "docker_unavailable" // Docker could not be asked for fred's objects
	StoreMissing      = "store_missing"      // a file of fred's is not where -v013-dir says
)

// lockWait is how long fred's files may refuse the shared lock: fred holds an
// exclusive one for as long as it runs.
const lockWait = time.Second

// Inputs are where the preflight looks.
type Inputs struct {
	FredDir    string // fred's four bbolt files, by fred's default names
	DataDir    string // berthd's data dir: adoption makes it, so it must hold nothing yet
	ListenAddr string // fred's (and berthd's) listen_addr: nothing may listen there
	VolumeRoot string // volume_data_path ("" none)
	Objects    func(ctx context.Context) ([]dockerio.FredObject, error)
	Images     func(ctx context.Context, refs []string) (map[string]dockerio.FredImage, error)
	Rules      Rules
	Now        time.Time
}

// Preflight reads fred's host and judges it, returning what it read (nil when
// it could not read it all). It writes nothing anywhere: fred's files are
// opened read-only, Docker is only listed, the volume root only read.
func Preflight(ctx context.Context, in Inputs) (*Report, *Evidence) {
	r := &Report{Backend: in.Rules.Backend}
	if conn, err := net.DialTimeout("tcp", in.ListenAddr, lockWait); err == nil {
		_ = conn.Close()
		r.Host = append(r.Host, Finding{FredRunning, "something listens on listen_addr " + in.ListenAddr})
	}
	if entries, err := os.ReadDir(in.DataDir); err == nil && len(entries) > 0 {
		r.Host = append(r.Host, Finding{DataDirNotEmpty, fmt.Sprintf("data_dir %s holds %d entries: adoption writes a new one", in.DataDir, len(entries))})
	}
	stores, err := fredv013.Read(in.FredDir, lockWait)
	switch {
	case errors.Is(err, fredv013.ErrLocked):
		r.Host = append(r.Host, Finding{FredRunning, err.Error()})
	case errors.Is(err, os.ErrNotExist):
		r.Host = append(r.Host, Finding{StoreMissing, err.Error() + " (-v013-dir names the directory of fred's four .db files)"})
	case err != nil:
		r.Host = append(r.Host, Finding{StoreMalformed, err.Error()})
	}
	objs, derr := in.Objects(ctx)
	if derr != nil {
		r.Host = append(r.Host, Finding{DockerUnavailable, derr.Error()})
	}
	root, rerr := readRoot(in.VolumeRoot)
	if rerr != nil {
		r.Host = append(r.Host, Finding{NoVolumeRoot, rerr.Error()})
	}
	if err != nil || derr != nil || rerr != nil {
		return r, nil
	}
	images, err := in.Images(ctx, retainedImages(stores, in.Rules))
	if err != nil {
		r.Host = append(r.Host, Finding{DockerUnavailable, err.Error()})
		return r, nil
	}
	ev := &Evidence{Stores: stores, Objects: objs, Images: images, Root: root, Now: in.Now}
	judged := Classify(*ev, in.Rules)
	judged.Host = append(r.Host, judged.Host...)
	return judged, ev
}

// FileHashes are the sha256 of fred's four files: recorded by the adoption, and
// what proves fred's files were never written.
func FileHashes(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range []string{fredv013.CallbacksFile, fredv013.DiagnosticsFile, fredv013.ReleasesFile, fredv013.RetentionFile} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out[name] = fmt.Sprintf("%x", sha256.Sum256(raw))
	}
	return out, nil
}

// retainedImages are the image references fred's retained manifests name (a
// manifest berthd refuses names none: Classify refuses its lease).
func retainedImages(st *fredv013.Stores, rules Rules) []string {
	var out []string
	for _, rec := range st.Retentions {
		if built, err := rules.Build(rec.StackManifest, rec.Items); err == nil {
			for _, svc := range built.Services {
				out = append(out, svc.Image)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readRoot lists fred's volume directories, what each holds, and berth's
// installation marker.
func readRoot(path string) (VolumeRoot, error) {
	root := VolumeRoot{Path: path, Entries: map[string]bool{}, Usage: map[string]int64{}}
	if path == "" {
		return root, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return root, nil // fred kept no volume there
	}
	fs, err := volumes.Detect(path)
	if err != nil {
		return root, fmt.Errorf("volume_data_path %s: %w", path, err)
	}
	root.Filesystem = fs
	entries, err := os.ReadDir(path)
	if err != nil {
		return root, fmt.Errorf("volume_data_path %s: %w", path, err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "fred-") {
			root.Entries[e.Name()] = true
			root.Usage[e.Name()] = usage(filepath.Join(path, e.Name()))
		}
	}
	if raw, err := os.ReadFile(filepath.Join(path, volumes.InstallationMarker)); err == nil {
		root.Installation = strings.TrimSpace(string(raw))
	}
	return root, nil
}

// usage is the bytes of the regular files under dir (what a retained volume
// holds: a restore into a smaller tier must fit it).
func usage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
