package steps

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Images admits a release's images. It has no Down: image content is shared
// by every lease that runs it.
type Images struct {
	API         ImagesAPI
	PullTimeout time.Duration
	Log         *zerolog.Logger
}

// Image is one service's image: its reference, and the recorded content to
// admit instead of the tag (Pin.ID "": the tag, resolved through its registry).
type Image struct {
	Service, Ref string
	Pin          messages.ImagePin
}

// Up admits every image, each reference once, and answers them by service. A
// failure is a *Failed (image_pull_failed, or internal).
func (s Images) Up(ctx context.Context, want []Image) (map[string]dockerio.ImageInfo, error) {
	byRef := map[string]dockerio.ImageInfo{}
	images := map[string]dockerio.ImageInfo{}
	for _, w := range want {
		info, done := byRef[w.Ref]
		if !done {
			pctx, pcancel := context.WithTimeout(ctx, s.PullTimeout)
			var err error
			if w.Pin.ID != "" {
				info, err = s.API.PinnedImage(pctx, w.Pin)
			} else {
				info, err = s.API.ResolveImage(pctx, w.Ref)
			}
			timedOut := pctx.Err() != nil
			pcancel()
			if err != nil {
				if ctx.Err() == nil {
					s.Log.Warn().Err(err).Str("image", w.Ref).Msg("image admission failed")
				}
				switch {
				case errors.Is(err, dockerio.ErrImageNotAdmissible):
					return nil, fail(messages.ReasonImagePullFailed, notAdmissibleMessage(err), err)
				case errors.Is(err, dockerio.ErrImagePull) || timedOut:
					return nil, fail(messages.ReasonImagePullFailed, "image could not be pulled", err)
				}
				return nil, fail(messages.ReasonInternal, "provisioning failed: image", err)
			}
			byRef[w.Ref] = info
		}
		images[w.Service] = info
	}
	return images, nil
}

// notAdmissibleMessage is the failure message of an image refused at
// admission: the rule it broke (17 VOLUMEs, a reserved label…), so the tenant
// knows what to change.
func notAdmissibleMessage(err error) string {
	msg := "image metadata is not admissible"
	if _, why, ok := strings.Cut(err.Error(), dockerio.ErrImageNotAdmissible.Error()+": "); ok {
		msg += ": " + why
	}
	return Bounded(msg)
}
