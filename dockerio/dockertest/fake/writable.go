package fake

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/isolation"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/policy"
)

// writableAnswer is what the fake's detection and seeding answer for one image.
type writableAnswer struct {
	paths              []string
	detectErr, seedErr error
}

// SetWritablePaths makes detection of image imageID find paths (nil: none),
// in that order, or fail with detectErr; and its seeding fail with seedErr.
// The real engine reads them from the image (dockerio/engine/writable.go).
func (e *Engine) SetWritablePaths(imageID string, paths []string, detectErr, seedErr error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writable[imageID] = writableAnswer{paths: slices.Clone(paths), detectErr: detectErr, seedErr: seedErr}
}

// Seeded is every request SeedWritablePaths carried out, in order.
func (e *Engine) Seeded() []dockerio.SeedRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seeded)
}

// SetSeccompEnabled makes SeccompEnabled answer enabled (true until set).
func (e *Engine) SetSeccompEnabled(enabled bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noSeccomp = !enabled
}

// DetectWritablePaths answers the paths SetWritablePaths gave the image, as
// the real engine would keep them: a path over or under a VOLUME, a tenant
// tmpfs or /tmp and /run is refused, those past MaxWritablePaths dropped; the
// user is resolved like ImageUser.
func (e *Engine) DetectWritablePaths(ctx context.Context, q dockerio.WritableQuery) (dockerio.Writable, error) {
	if err := e.enter(ctx, OpDetectWritable); err != nil {
		return dockerio.Writable{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	img, ok := e.local[q.ImageID]
	if !ok {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: image %s: %w", q.ImageID, errdefs.ErrNotFound)
	}
	ans := e.writable[q.ImageID]
	if ans.detectErr != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %w", ans.detectErr)
	}
	var w dockerio.Writable
	var err error
	if w.UID, w.GID, err = imageUser(img, cmp.Or(q.User, img.info.User)); err != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %w", err)
	}
	blocked := slices.Concat([]string{"/tmp", "/run"}, img.info.Volumes, q.Tmpfs)
	for _, p := range ans.paths {
		switch {
		case slices.ContainsFunc(blocked, func(b string) bool { return policy.Overlap(p, b) }):
			w.Refused = append(w.Refused, p+": over or under an image VOLUME or a tmpfs")
		case len(w.Paths) == dockerio.MaxWritablePaths:
			w.Dropped = append(w.Dropped, p)
		default:
			w.Paths = append(w.Paths, p)
		}
	}
	return w, nil
}

// SeedWritablePaths checks the request as the real engine does and records
// it; the fake touches no filesystem.
func (e *Engine) SeedWritablePaths(ctx context.Context, req dockerio.SeedRequest) error {
	if err := e.enter(ctx, OpSeedWritable); err != nil {
		return err
	}
	if err := dockerio.CheckSeedRequest(req); err != nil {
		return fmt.Errorf("seed writable paths: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.local[req.ImageID]; !ok {
		return fmt.Errorf("seed writable paths: image %s: %w", req.ImageID, errdefs.ErrNotFound)
	}
	if err := e.writable[req.ImageID].seedErr; err != nil {
		return fmt.Errorf("seed writable paths: %w", err)
	}
	e.seeded = append(e.seeded, req)
	return nil
}

// SeccompEnabled answers what SetSeccompEnabled said (true by default).
func (e *Engine) SeccompEnabled(ctx context.Context) (bool, error) {
	if err := e.enter(ctx, OpSeccompEnabled); err != nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.noSeccomp, nil
}

// SweepHelpers counts the call (faults apply): the fake reads images without
// helper containers, so there is never one to remove.
func (e *Engine) SweepHelpers(ctx context.Context) (int, error) {
	if err := e.enter(ctx, OpSweepHelpers); err != nil {
		return 0, err
	}
	return 0, nil
}

// UnadoptedFredV013 counts the call (faults apply): the fake holds no fred
// v0.13 containers.
func (e *Engine) UnadoptedFredV013(ctx context.Context) ([]messages.Container, error) {
	if err := e.enter(ctx, OpUnadoptedFredV013); err != nil {
		return nil, err
	}
	return nil, nil
}

// RemoveGuard makes the next GuardIsolation find the guard missing (and put it
// back), as after an operator flushed the mangle table.
func (e *Engine) RemoveGuard() {
	e.mu.Lock()
	e.guardGone = true
	e.mu.Unlock()
}

// GuardIsolation counts the call (faults apply); it reports a reinstall once
// after RemoveGuard.
func (e *Engine) GuardIsolation(ctx context.Context) (bool, error) {
	if err := e.enter(ctx, OpGuardIsolation); err != nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	gone := e.guardGone
	e.guardGone = false
	return gone, nil
}

// DockerFirewall is a dockerd that programs its isolation rules.
func (e *Engine) DockerFirewall(context.Context) (isolation.DockerRules, error) {
	return isolation.DockerRules{Isolation: true, ICCDrop: true}, nil
}
