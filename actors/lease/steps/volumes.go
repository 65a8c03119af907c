package steps

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Volumes are the lease's managed volumes (one per stateful instance) and the
// scratch volumes its diskless instances seed writable paths into. Up makes a
// service's; Adopt and HandBack move a restore's retained data in and back;
// Down destroys them, or retains the managed ones, as the close decided. Each
// is idempotent: an absent volume is destroyed, an adopted one adopted.
type Volumes struct {
	API    dockerio.Volumes // nil: no volume root (volume_data_path) is configured
	Images ImagesAPI        // resolves the owner of a volume's mount points
	Lease  string
	Hold   func(name string) // hands a busy volume to the volumehold actor (nil: none)
	Log    *zerolog.Logger
	// FredLayout: the lease was adopted from fred v0.13, whose volumes nest a
	// VOLUME /var/lib/data at var/lib/data: Up moves it onto berthd's name first.
	FredLayout bool
}

// volumeRootUnproven is the tenant's message when the host's volume root is not
// the filesystem berthd opened (unmounted): no data is touched, nothing can be made.
const volumeRootUnproven = "provisioning failed: the host's volume storage is unavailable"

// RestoreVolume is one volume a restore adopts from its retained lease.
type RestoreVolume struct {
	Service       string `json:"service"`
	Index         int    `json:"index"`
	Retained      string `json:"retained"`        // its name in the retention namespace
	SourceQuotaMB int64  `json:"source_quota_mb"` // restored on a hand-back
}

// Up creates (or reuses, its quota updated) the volume of every instance of a
// stateful service, with a subdirectory per image VOLUME target whose mount
// point belongs to the user the container runs as: the detected one (d), else
// the image's user resolved for the manifest's override. It lists their
// directories in sp.VolumeDirs. A failure is a *Failed.
func (s Volumes) Up(ctx context.Context, sp *dockerio.ServicePlan, img dockerio.ImageInfo, d *Detected) error {
	if sp.DiskMB <= 0 {
		return nil
	}
	err := s.up(ctx, sp, img, d)
	if err == nil || ctx.Err() != nil {
		return err
	}
	s.Log.Error().Err(err).Msg("managed volumes")
	if errors.Is(err, dockerio.ErrImageNotAdmissible) {
		return fail(messages.ReasonImagePullFailed, userNotInImage, err)
	}
	if errors.Is(err, dockerio.ErrVolumeRootUnproven) {
		return fail(messages.ReasonInternal, volumeRootUnproven, err)
	}
	return fail(messages.ReasonInternal, "provisioning failed: managed volumes", err)
}

func (s Volumes) up(ctx context.Context, sp *dockerio.ServicePlan, img dockerio.ImageInfo, d *Detected) error {
	if s.API == nil {
		return fmt.Errorf("service %s is stateful but no volume root (volume_data_path) is configured", sp.Name)
	}
	subdirs := make([]string, 0, len(img.Volumes))
	for _, target := range img.Volumes {
		subdirs = append(subdirs, dockerio.VolumeSubdir(target))
	}
	uid, gid, err := s.owner(ctx, sp, img, d)
	if err != nil {
		return fmt.Errorf("user %q of %s: %w", sp.User, sp.Name, err)
	}
	for i := range sp.Quantity {
		if s.FredLayout {
			if err := s.API.Unnest(ctx, messages.VolumeName(s.Lease, sp.Name, i), img.Volumes); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("volume of %s/%d, fred's layout: %w", sp.Name, i, err)
			}
		}
		path, err := s.API.Ensure(ctx, messages.VolumeName(s.Lease, sp.Name, i), sp.DiskMB, subdirs, uid, gid)
		if err != nil {
			return fmt.Errorf("volume of %s/%d: %w", sp.Name, i, err)
		}
		sp.VolumeDirs = append(sp.VolumeDirs, path)
	}
	return nil
}

// owner is the uid:gid a stateful service's volume mount points get: the
// detected user, else (no detection, or a failed one) the image's user
// resolved for the manifest's override.
func (s Volumes) owner(ctx context.Context, sp *dockerio.ServicePlan, img dockerio.ImageInfo, d *Detected) (int, int, error) {
	if d != nil && d.err == nil {
		return d.found.UID, d.found.GID, nil
	}
	if sp.User != "" && len(img.Volumes) > 0 {
		return s.Images.ImageUser(ctx, img.ID, sp.User)
	}
	return img.UID, img.GID, nil
}

// scratch makes the scratch volume of a diskless instance, capped at quotaMB.
func (s Volumes) scratch(ctx context.Context, service string, index int, quotaMB int64) (string, error) {
	return s.API.Ensure(ctx, messages.ScratchVolumeName(s.Lease, service, index), quotaMB, nil, 0, 0)
}

// Adopt renames a restore's retained volumes into the lease's names. A volume
// already adopted (a retry after a crash) is accepted; one that exists in
// neither namespace fails the restore: its data is gone. A failure is a
// *Failed.
func (s Volumes) Adopt(ctx context.Context, vols []RestoreVolume) error {
	if s.API == nil {
		return fail(messages.ReasonInternal, "no volume root is configured", nil)
	}
	for _, v := range vols {
		name := messages.VolumeName(s.Lease, v.Service, v.Index)
		switch err := s.API.Rename(ctx, v.Retained, name); {
		case err == nil:
		case ctx.Err() != nil:
			return err
		case errdefs.IsNotFound(err):
			if ok, xerr := s.API.Exists(ctx, name); !ok || xerr != nil {
				return fail(messages.ReasonRestoreFailed, "retained data of "+v.Service+" is missing", err)
			} // else adopted by an earlier attempt
		case errors.Is(err, dockerio.ErrVolumeRootUnproven):
			// Nothing moved: the retained data stays where its record says.
			return fail(messages.ReasonInternal, volumeRootUnproven, err)
		default:
			s.Log.Error().Err(err).Str("volume", v.Retained).Msg("adopt retained volume")
			return fail(messages.ReasonInternal, "provisioning failed: adopting retained data", err)
		}
	}
	return nil
}

// HandBack returns adopted volumes to the retention namespace with their
// source quota (one already back is accepted).
func (s Volumes) HandBack(ctx context.Context, vols []RestoreVolume) error {
	if s.API == nil {
		return nil
	}
	var errs []error
	for _, v := range vols {
		name := messages.VolumeName(s.Lease, v.Service, v.Index)
		if err := s.API.Rename(ctx, name, v.Retained); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("hand back %s: %w", name, err))
			continue
		}
		if ok, xerr := s.API.Exists(ctx, v.Retained); xerr == nil && ok {
			if err := s.API.SetQuota(ctx, v.Retained, v.SourceQuotaMB); err != nil {
				errs = append(errs, fmt.Errorf("restore the quota of %s: %w", v.Retained, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Down destroys the scratch volumes, then the managed ones — or with retain
// moves each into the retention namespace, measured (one the lease never made
// is skipped: nothing to keep), but for those in reclaim (writable-path-only,
// as the close judged), which are destroyed. A busy volume is handed to Hold
// and listed in held: the close waits for it.
func (s Volumes) Down(ctx context.Context, scratch []string, managed []messages.RetainedVolume, retain bool, reclaim []string) (retained []messages.RetainedVolume, held []string, err error) {
	if s.API == nil {
		return nil, nil, nil
	}
	destroy := slices.Clone(scratch)
	var keep []messages.RetainedVolume
	for _, v := range managed {
		if !retain || slices.Contains(reclaim, v.Name) {
			destroy = append(destroy, v.Name)
		} else {
			keep = append(keep, v)
		}
	}
	for _, name := range destroy {
		busy, err := s.destroy(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if busy {
			held = append(held, name)
		}
	}
	if !retain {
		return nil, held, nil
	}
	for _, v := range keep {
		kept, ok, err := s.retain(ctx, v)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			retained = append(retained, kept)
		}
	}
	return retained, held, nil
}

// retain moves a volume into the retention namespace and measures it; ok is
// false when it was never created (the lease never launched): nothing to keep.
func (s Volumes) retain(ctx context.Context, v messages.RetainedVolume) (messages.RetainedVolume, bool, error) {
	retained := messages.RetainedVolumeName(s.Lease, v.Service, v.Index)
	err := s.API.Rename(ctx, v.Name, retained)
	if errdefs.IsNotFound(err) {
		ok, xerr := s.API.Exists(ctx, retained)
		if xerr != nil || !ok {
			return v, false, xerr
		}
		err = nil // renamed by an earlier attempt of this close
	}
	if err != nil {
		return v, false, fmt.Errorf("retain %s: %w", v.Name, err)
	}
	used, err := s.API.Usage(ctx, retained)
	if err != nil {
		return v, false, fmt.Errorf("measure %s: %w", retained, err)
	}
	v.Name, v.UsedBytes = retained, used
	return v, true, nil
}

// destroy destroys a volume; a busy one is handed to Hold (busy).
func (s Volumes) destroy(ctx context.Context, name string) (busy bool, err error) {
	err = s.API.Destroy(ctx, name)
	if errdefs.IsConflict(err) {
		s.Log.Warn().Str("volume", name).Msg("volume busy: its deletion is held and retried")
		if s.Hold != nil {
			s.Hold(name)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("destroy %s: %w", name, err)
	}
	return false, nil
}
