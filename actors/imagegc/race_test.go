package imagegc

// The collector against an admission of the same image, on real Docker, in the
// two orders that could lose the admission its image: the admission looks at
// the image after the pass took its pins but before it removes it, and the
// admission arrives while the removal is under way. Both admissions create
// their container from the image they were given.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

func dockerOrSkip(t *testing.T) *client.Client {
	t.Helper()
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		if os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true" {
			t.Fatal("no Docker engine at /var/run/docker.sock (BERTH_REQUIRE_DOCKER/CI demand it)")
		}
		t.Skip("SKIPPING: no Docker engine")
	}
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	return dc
}

func testImage() string {
	if img := os.Getenv("BERTH_TEST_IMAGE"); img != "" {
		return img
	}
	return "127.0.0.1:5000/berth/workload:test"
}

// pushedImage builds a distinct image (the workload plus a label), pushes it
// to the local registry and removes it locally: the next admission pulls it.
func pushedImage(t *testing.T, dc *client.Client) (ref, id string) {
	t.Helper()
	ctx := context.Background()
	ref = "127.0.0.1:5000/berth/gc-race-" + uuid.NewString()[:8] + ":v1"
	df := fmt.Sprintf("FROM %s\nLABEL berth.test.gc=%q\n", testImage(), ref)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	_, _ = tw.Write([]byte(df))
	_ = tw.Close()
	res, err := dc.ImageBuild(ctx, &buf, types.ImageBuildOptions{Tags: []string{ref}, Remove: true, Version: types.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("build: %s", out)
	}
	img, err := dc.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	id = img.ID
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true}) })
	rc, err := dc.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: base64.StdEncoding.EncodeToString([]byte("{}"))})
	if err != nil {
		t.Fatal(err)
	}
	out, _ = io.ReadAll(rc)
	rc.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("push: %s", out)
	}
	if _, err := dc.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	return ref, id
}

// hooked is the real engine with a hook before the store listing and before
// each removal.
type hooked struct {
	*engine.Engine
	beforeList, beforeRemove func()
}

func (h *hooked) StoreImages(ctx context.Context) ([]dockerio.StoredImage, error) {
	if h.beforeList != nil {
		h.beforeList()
	}
	return h.Engine.StoreImages(ctx)
}

func (h *hooked) RemoveImageRef(ctx context.Context, ref string) error {
	if h.beforeRemove != nil {
		h.beforeRemove()
	}
	return h.Engine.RemoveImageRef(ctx, ref)
}

// raceRig is a collector over the real engine, no pins, a budget every image
// exceeds, and an admission that holds, admits and creates a container.
type raceRig struct {
	t      *testing.T
	dc     *client.Client
	eng    *engine.Engine
	holds  *dockerio.ImageHolds
	docker *hooked
	a      *Actor
	owned  map[string]*Owned
	mu     sync.Mutex
}

func newRaceRig(t *testing.T) *raceRig {
	dc := dockerOrSkip(t)
	eng, err := engine.New(engine.Options{InstallationID: "imagegc-race-" + uuid.NewString()[:8]})
	if err != nil {
		t.Fatal(err)
	}
	r := &raceRig{t: t, dc: dc, eng: eng, holds: dockerio.NewImageHolds(), owned: map[string]*Owned{}}
	eng.OnPulled(func(id, ref string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.owned[id] = &Owned{Refs: []string{ref}, PulledAt: time.Now()}
	})
	r.docker = &hooked{Engine: eng}
	set := DefaultSettings()
	set.BudgetBytes = 1
	r.a = &Actor{Deps: &Deps{Env: supervisors.Env{Log: zerolog.Nop(), Now: time.Now}, Docker: r.docker, Holds: r.holds,
		Settings: &set, Metrics: NewMetrics(nil),
		Pins: func(context.Context) (messages.ImagePins, error) {
			return messages.ImagePins{IDs: map[string]struct{}{}, Ready: true}, nil
		}}}
	return r
}

// admit is a lease's launch in miniature: hold, admit, create from the image.
func (r *raceRig) admit(ref string) (string, error) {
	release := r.holds.Hold(dockerio.ImageKeys(ref))
	defer release()
	ctx := context.Background()
	info, err := r.eng.ResolveImage(ctx, ref)
	if err != nil {
		return "", err
	}
	time.Sleep(50 * time.Millisecond) // the rest of a launch
	c, err := r.dc.ContainerCreate(ctx, &container.Config{Image: info.ID}, nil, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create from %s: %w", info.ID, err)
	}
	_ = r.dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	return info.ID, nil
}

func (r *raceRig) collect() *result {
	r.mu.Lock()
	owned := make(map[string]*Owned, len(r.owned))
	for k, v := range r.owned {
		owned[k] = v
	}
	r.mu.Unlock()
	res, err := r.a.collect(context.Background(), owned)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func TestCollect_AdmissionHoldingAfterThePassTookItsPins_KeepsTheImage(t *testing.T) {
	r := newRaceRig(t)
	ref, id := pushedImage(t, r.dc)
	if _, err := r.admit(ref); err != nil { // pulled: this installation's, and unpinned now
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	var once sync.Once
	r.docker.beforeList = func() {
		once.Do(func() {
			// The pass has marked the holds and has its pins (none): an
			// admission of the image begins now and holds it past the removal.
			release := r.holds.Hold(dockerio.ImageKeys(ref))
			go func() {
				defer release()
				time.Sleep(300 * time.Millisecond)
				_, err := r.admit(ref)
				admitted <- err
			}()
		})
	}
	res := r.collect()
	if len(res.removed) != 0 || res.inhibited[InhibitHeld] != 1 {
		t.Fatalf("removed %v, inhibited %v: the held image must be left", res.removed, res.inhibited)
	}
	if err := <-admitted; err != nil {
		t.Fatalf("the admission lost its image: %v", err)
	}
	if _, err := r.dc.ImageInspect(context.Background(), id); err != nil {
		t.Fatalf("the image is gone: %v", err)
	}
	// Nobody holds it now: the next pass removes it.
	r.docker.beforeList = nil
	if res := r.collect(); len(res.removed) != 1 {
		t.Fatalf("removed %v, inhibited %v: the image no admission holds must go", res.removed, res.inhibited)
	}
}

func TestCollect_AdmissionArrivingDuringTheRemoval_WaitsAndPullsAgain(t *testing.T) {
	r := newRaceRig(t)
	ref, _ := pushedImage(t, r.dc)
	if _, err := r.admit(ref); err != nil {
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	var once sync.Once
	r.docker.beforeRemove = func() {
		once.Do(func() {
			go func() { _, err := r.admit(ref); admitted <- err }()
			time.Sleep(200 * time.Millisecond) // the admission waits on the removal under way
			select {
			case err := <-admitted:
				t.Errorf("an admission went ahead during the removal of its image (err %v)", err)
				admitted <- err
			default:
			}
		})
	}
	if res := r.collect(); len(res.removed) != 1 {
		t.Fatalf("removed %v, inhibited %v", res.removed, res.inhibited)
	}
	if err := <-admitted; err != nil {
		t.Fatalf("the admission after the removal failed: %v", err)
	}
	// It pulled the image again: this installation's once more, and present.
	r.docker.beforeRemove = nil
	if n := len(r.owned); n != 1 {
		t.Fatalf("%d images recorded, want the one pulled again", n)
	}
	for id := range r.owned {
		if _, err := r.dc.ImageInspect(context.Background(), id); err != nil {
			t.Fatalf("the image pulled again is gone: %v", err)
		}
	}
	if res := r.collect(); len(res.removed) != 1 {
		t.Fatalf("removed %v, inhibited %v: the image nobody holds must go", res.removed, res.inhibited)
	}
}
