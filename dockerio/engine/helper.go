package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"

	"github.com/berth-dev/berth/dockerio"
)

// Image helpers: berth reads an image's files (its /etc/passwd, the content of
// its writable paths) from a container created from the exact image ID and
// never started (nothing of the image runs), without network, its VOLUMEs
// covered by tmpfs (so creating it makes no anonymous volume), labelled as
// ours and removed at once.

// Labels of a helper container: never fred.managed (it is no lease's), but
// carrying the installation so a sweep removes only our leftovers. Every helper
// carries the value "image-user", the first helper's: a sweep of any release
// finds the leftovers of every other.
const (
	labelHelper     = "fred.helper"
	helperImageUser = "image-user"
	// labelHelperIncarnation names the Engine that made the helper: any other
	// value (or none, before it existed) is a dead daemon's leftover.
	labelHelperIncarnation = "fred.helper_incarnation"
)

// helperRemoveTimeout bounds removing a helper after the caller's ctx ended.
const helperRemoveTimeout = 30 * time.Second

// helperStaleAfter is how old one of this Engine's own helpers must be before a
// sweep takes it for a leftover (a removal that failed): younger ones may be
// another lookup's, still being read. A dead incarnation's go at once.
const helperStaleAfter = 10 * time.Minute

func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withHelper runs read on a never-started helper container of imageID (whose
// VOLUME targets are volumes) and removes the helper afterwards.
func (e *Engine) withHelper(ctx context.Context, imageID string, volumes []string, read func(id string) error) error {
	e.sweepHelpers(ctx)
	var mounts []mount.Mount
	for _, v := range volumes {
		mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: v})
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	resp, err := e.docker.ContainerCreate(ctx, &container.Config{
		Image: imageID,
		// Never started; an entrypoint is set only because Docker refuses to
		// create a container of an image that has none.
		Entrypoint:      []string{"/berth-image-helper-never-started"},
		Cmd:             []string{},
		NetworkDisabled: true,
		Labels: map[string]string{labelHelper: helperImageUser, dockerio.LabelInstallation: e.opts.InstallationID,
			labelHelperIncarnation: e.incarnation},
	}, &container.HostConfig{NetworkMode: "none", Mounts: mounts}, nil, nil, "berth-image-helper-"+hex.EncodeToString(suffix))
	if err != nil {
		return dockerErr("create image helper of "+trimID(imageID), err)
	}
	defer e.removeHelper(ctx, resp.ID)
	return read(resp.ID)
}

// removeHelper removes a helper even when ctx has ended (bounded on its own);
// it reports whether the helper is gone.
func (e *Engine) removeHelper(ctx context.Context, id string) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), helperRemoveTimeout)
	defer cancel()
	if err := e.docker.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
		e.log.Warn().Err(err).Str("container_id", id).Msg("image helper not removed; the next sweep retries")
		return false
	}
	return true
}

// SweepHelpers removes the image helpers of this installation that a killed
// daemon left (any age) and this Engine's own whose removal failed (stale
// ones). The reconciler calls it every pass; each helper's maker, before it.
func (e *Engine) SweepHelpers(ctx context.Context) (removed int, err error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", labelHelper+"="+helperImageUser),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID),
	)})
	if err != nil {
		return 0, dockerErr("list image helpers", err)
	}
	for _, c := range list {
		if c.Labels[labelHelper] != helperImageUser || c.Labels[dockerio.LabelInstallation] != e.opts.InstallationID {
			continue
		}
		dead := c.Labels[labelHelperIncarnation] != e.incarnation
		if dead || time.Since(time.Unix(c.Created, 0)) > helperStaleAfter {
			if e.removeHelper(ctx, c.ID) {
				removed++
			}
		}
	}
	return removed, nil
}

// sweepHelpers is SweepHelpers best effort: a failure leaves them for the next sweep.
func (e *Engine) sweepHelpers(ctx context.Context) { _, _ = e.SweepHelpers(ctx) }
