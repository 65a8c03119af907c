package engine

import (
	"archive/tar"
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/policy"
)

// A volume's mount points are given to the numeric user a container runs as.
// An image names its user as Docker does (name, uid, name:group, uid:gid…);
// a name means whatever the image's own /etc/passwd and /etc/group say, so
// berth reads those files from the exact image through an image helper
// (helper.go). The answer is cached per image ID and user.

// maxAccountFile bounds /etc/passwd and /etc/group as read from an image.
const maxAccountFile = 1 << 20

// maxUserCache bounds the cache; when full it starts over (images are few).
const maxUserCache = 4096

type userIDs struct{ uid, gid int }

// withUser fills info.UID/GID from info.User of the image info.ID.
func (e *Engine) withUser(ctx context.Context, info dockerio.ImageInfo, volumes []string) (dockerio.ImageInfo, error) {
	uid, gid, err := e.imageUser(ctx, info.ID, volumes, info.User)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	info.UID, info.GID = uid, gid
	return info, nil
}

// ImageUser resolves user (an image's USER, or a manifest's user override) to
// the numeric uid and gid a container of image imageID runs as, the way
// Docker's runtime does: numeric uid:gid as is; a user name through the
// image's /etc/passwd (its primary group unless a group is given), a group
// name through /etc/group; a numeric uid alone takes its primary group from
// /etc/passwd when listed there, else 0; "" is root. A name the image does not
// list wraps dockerio.ErrImageNotAdmissible: Docker could not start it either.
func (e *Engine) ImageUser(ctx context.Context, imageID, user string) (uid, gid int, err error) {
	if !isImageID(imageID) {
		return 0, 0, fmt.Errorf("image user: %q is not an image ID", imageID)
	}
	resp, err := e.imageByID(ctx, imageID)
	if err != nil {
		return 0, 0, err
	}
	return e.imageUser(ctx, imageID, imageVolumes(resp), user)
}

// imageUser resolves the first non-empty of users (the manifest's override,
// then the image's USER) in the image.
func (e *Engine) imageUser(ctx context.Context, imageID string, volumes []string, users ...string) (int, int, error) {
	user := cmp.Or(users...)
	u, err := policy.ParseUser(user)
	if err != nil {
		return 0, 0, fmt.Errorf("image %s: %w: %w", trimID(imageID), dockerio.ErrImageNotAdmissible, err)
	}
	if u.UID >= 0 && u.GID >= 0 {
		return u.UID, u.GID, nil // numeric uid:gid (or root): nothing to look up
	}
	key := imageID + "\x00" + user
	if ids, ok := e.users.get(key); ok {
		return ids.uid, ids.gid, nil
	}
	files, err := e.readImageFiles(ctx, imageID, volumes, "/etc/passwd", "/etc/group")
	if err != nil {
		return 0, 0, fmt.Errorf("image %s: resolve user %q: %w", trimID(imageID), user, err)
	}
	ids, err := resolveUser(u, files["/etc/passwd"], files["/etc/group"])
	if err != nil {
		return 0, 0, fmt.Errorf("image %s: %w: user %q: %w", trimID(imageID), dockerio.ErrImageNotAdmissible, user, err)
	}
	e.users.put(key, ids)
	return ids.uid, ids.gid, nil
}

// resolveUser looks u up in the image's passwd and group text (nil = the image
// has no such file).
func resolveUser(u policy.User, passwd, group []byte) (userIDs, error) {
	ids := userIDs{uid: u.UID, gid: u.GID}
	if u.Name != "" || ids.gid < 0 && u.Group == "" {
		var entry *passwdEntry
		for _, p := range parsePasswd(passwd) {
			if (u.Name != "" && p.name == u.Name) || (u.Name == "" && p.uid == u.UID) {
				entry = &p
				break
			}
		}
		switch {
		case entry != nil:
			ids.uid = entry.uid
			if ids.gid < 0 && u.Group == "" {
				ids.gid = entry.gid
			}
		case u.Name != "":
			if passwd == nil {
				return userIDs{}, errors.New("the image has no /etc/passwd to look the name up in")
			}
			return userIDs{}, fmt.Errorf("no user %q in the image's /etc/passwd", u.Name)
		case u.Group == "" && ids.gid < 0:
			ids.gid = 0 // a numeric uid the image does not list: Docker runs it with gid 0
		}
	}
	if u.Group != "" {
		found := false
		for _, g := range parseGroup(group) {
			if g.name == u.Group {
				ids.gid, found = g.gid, true
				break
			}
		}
		if !found {
			if group == nil {
				return userIDs{}, errors.New("the image has no /etc/group to look the group up in")
			}
			return userIDs{}, fmt.Errorf("no group %q in the image's /etc/group", u.Group)
		}
	}
	return ids, nil
}

type passwdEntry struct {
	name     string
	uid, gid int
}

// accountLines splits an account file's lines (passwd, group) into their
// colon-separated fields, skipping blanks, comments and lines of fewer than min.
func accountLines(b []byte, min int) [][]string {
	var out [][]string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), maxAccountFile)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Split(line, ":"); len(f) >= min {
			out = append(out, f)
		}
	}
	return out
}

// parsePasswd reads name:password:uid:gid:… lines; malformed ones are skipped
// (as libc and runc skip them).
func parsePasswd(b []byte) []passwdEntry {
	var out []passwdEntry
	for _, f := range accountLines(b, 4) {
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uid, gid: gid})
	}
	return out
}

type groupEntry struct {
	name string
	gid  int
}

// parseGroup reads name:password:gid:members lines.
func parseGroup(b []byte) []groupEntry {
	var out []groupEntry
	for _, f := range accountLines(b, 3) {
		gid, err := strconv.Atoi(f[2])
		if err != nil || gid < 0 {
			continue
		}
		out = append(out, groupEntry{name: f[0], gid: gid})
	}
	return out
}

// readImageFiles copies files out of an image helper of imageID; a file the
// image lacks maps to nil.
func (e *Engine) readImageFiles(ctx context.Context, imageID string, volumes []string, paths ...string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := e.withHelper(ctx, imageID, volumes, func(id string) error {
		for _, p := range paths {
			b, err := e.copyFile(ctx, id, p)
			if err != nil {
				return err
			}
			out[p] = b
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// copyFile reads one regular file from the helper, following at most a few
// symlinks (resolved inside the image); nil when it does not exist.
func (e *Engine) copyFile(ctx context.Context, id, p string) ([]byte, error) {
	for hops := 0; hops < 8; hops++ {
		rc, _, err := e.docker.CopyFromContainer(ctx, id, p)
		if isNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, dockerErr("copy "+p+" from image-user helper", err)
		}
		hdr, body, err := firstTarEntry(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s from the image: %w", p, err)
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			return body, nil
		case tar.TypeSymlink:
			target := hdr.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(p), target)
			}
			p = path.Clean(target)
		default:
			return nil, fmt.Errorf("%s in the image is not a regular file (tar type %q)", p, hdr.Typeflag)
		}
	}
	return nil, fmt.Errorf("%s in the image: too many symlinks", p)
}

func firstTarEntry(r io.Reader) (*tar.Header, []byte, error) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(tr, maxAccountFile+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > maxAccountFile {
		return nil, nil, fmt.Errorf("larger than %d bytes", maxAccountFile)
	}
	return hdr, body, nil
}
