package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/actors/imagegc"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/actors/volumehold"
	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/persistence"
)

// The data-dir checks: the directory and its files, the store, the identity, the lock.

// fileOwner is the owner of fi as "name (uid)".
func fileOwner(fi fs.FileInfo) (uint32, string) {
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return 0, "?"
	}
	name := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return st.Uid, name
}

// checkDataDir: the data dir exists and is private (0700; berthd creates it so),
// and berth's files in it are regular files, mode 0600, owned by the dir's owner
// (what persistence and the secret loader demand), never symlinks.
func checkDataDir(_ context.Context, env *doctorEnv) checkResult {
	const name = "data_dir"
	dir := env.cfg.DataDir
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !env.cfg.ProductionMode:
		return warn(name, dir+" does not exist yet (berthd creates it at its first start)", "")
	case errors.Is(err, fs.ErrNotExist):
		return fail(name, dir+" does not exist", "install -d -o berth -g berth -m 0700 "+dir+" && "+env.initIdentityCmd())
	case err != nil:
		return fail(name, err.Error(), "")
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// persistence resolves it (the identity is bound to the target), so it works; say where.
		target, _ := filepath.EvalSymlinks(dir)
		if fi, err = os.Stat(dir); err != nil {
			return fail(name, fmt.Sprintf("%s is a symlink that does not resolve: %v", dir, err), "point data_dir at the real directory")
		}
		dir = target
	}
	if !fi.IsDir() {
		return fail(name, dir+" is not a directory", "point data_dir at a directory")
	}
	uid, owner := fileOwner(fi)
	perm := fi.Mode().Perm()
	verdict := verdictOK
	var problems, fixes []string
	found := func(v, problem, fix string) {
		verdict, problems = worse(verdict, v), append(problems, problem)
		if fix != "" {
			fixes = append(fixes, fix)
		}
	}
	switch {
	case perm&0o027 != 0:
		found(verdictFail, fmt.Sprintf("mode %04o lets others in (tenant data and the callback secret live here)", perm), "chmod 700 "+dir)
	case perm&0o070 != 0:
		found(verdictWarn, fmt.Sprintf("mode %04o, group may read (want 0700)", perm), "chmod 700 "+dir)
	}
	for _, f := range []struct {
		file     string
		required bool // persistence or the secret loader refuses it otherwise
	}{
		{"state.db", true}, {"storage-identity", true}, {"daemon.lock", true}, {config.CallbackSecretFile, true}, {"diagnostics.db", false},
	} {
		p := filepath.Join(dir, f.file)
		ffi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		bad := verdictFail
		if !f.required {
			bad = verdictWarn // diagnostics.db is set aside and recreated, never refused
		}
		switch {
		case err != nil:
			found(verdictFail, err.Error(), "")
		case ffi.Mode()&fs.ModeSymlink != 0:
			found(bad, f.file+" is a symlink (refused: it must be the file itself)", "replace "+p+" with the file it points to")
		case !ffi.Mode().IsRegular():
			found(bad, f.file+" is not a regular file", "")
		case ffi.Mode().Perm() != 0o600:
			found(bad, fmt.Sprintf("%s has mode %04o, want 0600 (refused otherwise)", f.file, ffi.Mode().Perm()), "chmod 600 "+p)
		default:
			if fuid, fowner := fileOwner(ffi); fuid != uid {
				found(bad, fmt.Sprintf("%s is owned by %s, the dir by %s", f.file, fowner, owner), "chown "+owner+": "+p)
			}
		}
	}
	if len(problems) == 0 {
		return ok(name, fmt.Sprintf("%s: owner %s, mode %04o; its files are 0600 and %s's", dir, owner, perm, owner))
	}
	return checkResult{Name: name, Verdict: verdict, Finding: dir + ": " + strings.Join(problems, "; "), Fix: strings.Join(fixes, " && ")}
}

// initIdentityCmd binds a new data dir to a fresh storage identity.
func (env *doctorEnv) initIdentityCmd() string {
	return "sudo -u berth berthd -config " + cmp.Or(env.cfg.File, "/etc/berth/berthd.yaml") + " -initialize-storage-identity new"
}

// checkStore opens state.db read-only on a consistent private copy (no lock,
// nothing written; see persistence.OpenReadOnly) and replays every journal the
// way berthd's start does.
func checkStore(ctx context.Context, env *doctorEnv) checkResult {
	const name = "store"
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	s, info, err := persistence.OpenReadOnly(ctx, persistence.ReadOnlyOptions{Dir: env.cfg.DataDir,
		MaxFileBytes: env.cfg.MaxStoreSizeMB << 20, TempDir: env.tempDir})
	if err != nil {
		env.storeErr = err
		return storeRefusal(env, err)
	}
	env.store, env.storeInfo = s, info
	if err := registry.Verify(s); err != nil {
		return fail(name, fmt.Sprintf("%s: a journal does not replay, berthd refuses to start: %v", s.Path(), err),
			"run the berthd version that wrote it, or restore state.db and storage-identity from a backup")
	}
	if _, _, err := volumehold.Load(s); err != nil {
		return fail(name, fmt.Sprintf("%s: the volumehold journal does not replay: %v", s.Path(), err),
			"run the berthd version that wrote it, or restore state.db and storage-identity from a backup")
	}
	if _, _, err := imagegc.Load(s); err != nil {
		return fail(name, fmt.Sprintf("%s: the imagegc journal does not replay: %v", s.Path(), err),
			"run the berthd version that wrote it, or restore state.db and storage-identity from a backup")
	}
	leases, err := s.Streams("lease/")
	if err != nil {
		return fail(name, err.Error(), "")
	}
	pending, _, err := s.OutboxStats()
	if err != nil {
		return fail(name, err.Error(), "")
	}
	finding := fmt.Sprintf("%s verified on a read-only copy: every journal replays (%d lease streams, %d callbacks pending)",
		s.Path(), len(leases), pending)
	if len(info.Findings) > 0 {
		return warn(name, finding+"; but: "+strings.Join(info.Findings, "; "),
			"berthd runs on it; keep a backup and check the disk (dmesg, smartctl)")
	}
	return ok(name, finding)
}

// storeRefusal turns an OpenReadOnly error into the store check's verdict and fix.
func storeRefusal(env *doctorEnv, err error) checkResult {
	const name = "store"
	msg := err.Error()
	switch {
	case errors.Is(err, persistence.ErrNoIdentity) && !env.cfg.ProductionMode:
		return warn(name, msg, "")
	case errors.Is(err, persistence.ErrNoIdentity):
		return fail(name, msg, env.initIdentityCmd())
	case errors.Is(err, fs.ErrNotExist):
		if env.cfg.ProductionMode {
			return fail(name, msg, "create the data dir and its storage identity (see data_dir)")
		}
		return warn(name, msg, "")
	case errors.Is(err, persistence.ErrForeign):
		return fail(name, "not opened: its storage identity does not match (see identity)", "see identity")
	case errors.Is(err, persistence.ErrUnsafeFile):
		return fail(name, msg, "make it the regular file itself, mode 0600, owned by berthd's user: chmod 600 "+filepath.Join(env.cfg.DataDir, config.StateDBFile))
	case errors.Is(err, persistence.ErrTooLarge):
		return fail(name, msg, "raise max_store_size_mb, then look at /stats for what grew")
	case errors.Is(err, persistence.ErrNewerSchema):
		return fail(name, msg, "run the berthd version that wrote it (or newer)")
	case errors.Is(err, persistence.ErrCorrupt):
		return fail(name, msg, "berthd refuses it: stop berthd and restore state.db and storage-identity from a backup")
	}
	return fail(name, msg, "")
}

// checkIdentity: the marker matches meta, and what the next start does about the
// identity's location.
func checkIdentity(_ context.Context, env *doctorEnv) checkResult {
	const name = "identity"
	err := env.storeErr
	switch {
	case errors.Is(err, persistence.ErrForeign):
		return fail(name, err.Error(), "the marker and state.db belong to different installations: restore this data dir's own storage-identity (with its state.db) from its backup; never copy a marker between data dirs")
	case errors.Is(err, persistence.ErrNoIdentity) || errors.Is(err, fs.ErrNotExist):
		if env.cfg.ProductionMode {
			return fail(name, "no storage identity in "+env.cfg.DataDir, env.initIdentityCmd())
		}
		return warn(name, "no storage identity in "+env.cfg.DataDir+" yet (berthd creates one at its first start)", "")
	case err != nil:
		return warn(name, "not checked: state.db was refused (see store)", "")
	}
	id, info := env.store.Identity(), env.storeInfo
	finding := fmt.Sprintf("marker matches state.db: storage_id %s, installation_id %s", id.StorageID, id.InstallationID)
	switch info.Binding {
	case persistence.BindingBind:
		return ok(name, finding+"; the next start records its location "+info.Location)
	case persistence.BindingRekey:
		return warn(name, fmt.Sprintf("%s, claimed at %s but found at %s (a copy or a move): the next start gives it a new installation_id, and Docker objects labelled fred.installation_id=%s are no longer managed",
			finding, info.RecordedLocation, info.Location, id.InstallationID),
			"if a berthd still runs from "+info.RecordedLocation+", this is a copy: do not start it; otherwise remove the old installation's containers by hand after the start (the log names them)")
	case persistence.BindingRepublish:
		return warn(name, finding+"; a re-key committed earlier is republished in the marker at the next start", "")
	}
	return ok(name, finding+", bound to "+info.Location)
}

// checkLock says who holds daemon.lock, read from the kernel's lock table
// without taking the lock (persistence.ReadLockHolder).
func checkLock(_ context.Context, env *doctorEnv) checkResult {
	const name = "lock"
	h, err := persistence.ReadLockHolder(env.cfg.DataDir)
	switch {
	case err != nil:
		return warn(name, "not checked: "+err.Error(), "")
	case !h.Held && h.RecordedPID == 0:
		return warn(name, "no berthd has run on "+env.cfg.DataDir+" yet (no "+h.Path+")", "systemctl start berthd")
	case !h.Held:
		return warn(name, fmt.Sprintf("%s is not held: no berthd runs on this data dir (the last one was pid %d)", h.Path, h.RecordedPID),
			"systemctl start berthd; journalctl -u berthd -n 50 says why it stopped")
	case h.PID == 0:
		return ok(name, h.Path+" is held by a process this namespace cannot see")
	case h.Comm == "berthd":
		return ok(name, fmt.Sprintf("held by berthd, pid %d", h.PID))
	}
	return warn(name, fmt.Sprintf("%s is held by pid %d (%s), which is not named berthd", h.Path, h.PID, h.Comm),
		fmt.Sprintf("find out what it is: ls -l /proc/%d/exe", h.PID))
}
