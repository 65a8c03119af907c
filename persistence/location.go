package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The installation identity (installation_id, the fred.installation_id label on every
// Docker object berth creates) is bound to the resolved location of the data dir that
// claimed it, recorded in meta.installation_location. A store found at any other
// location — a copy, or a moved data dir — is re-keyed: a fresh installation_id,
// committed by a compare-and-swap on the old id and old location, then republished in
// the marker. The storage identity (storage_id) never changes. An empty or malformed
// record is refused; it is never evidence of another location nor permission to re-key.

// maxLocationBytes bounds a recorded location (Linux PATH_MAX).
const maxLocationBytes = 4096

// maxOpenAttempts bounds how often Open starts over after losing an identity
// compare-and-swap to another writer of the same store.
const maxOpenAttempts = 3

// errIdentityRaced: meta changed between Open's read-only validation and its
// identity write (another opener re-keyed or bound the same store first). Open starts
// over and settles on the winner's identity.
var errIdentityRaced = errors.New("installation identity changed during open")

// Rekey reports an installation identity re-key: the store was claimed at
// OldLocation and found at NewLocation (a copy or a move), so it got a fresh
// installation id. Docker objects labelled with OldInstallationID are no longer this
// daemon's.
type Rekey struct {
	StorageID         string    // unchanged by a re-key
	OldInstallationID string    // the identity the store had at OldLocation
	NewInstallationID string    // the identity it has now, at NewLocation
	OldLocation       string    // resolved data dir that claimed OldInstallationID
	NewLocation       string    // resolved data dir that claims NewInstallationID
	At                time.Time // when the re-key was committed
	// Resumed: an earlier open committed the re-key but stopped before republishing
	// the marker; this open finished it. The earlier open may never have reported it.
	Resumed bool
}

// OperatorMessage is a one-line message for the daemon log: what changed and what
// the operator has to do about the old identity's containers.
func (r Rekey) OperatorMessage() string {
	return oneLine(fmt.Sprintf(
		"installation identity re-keyed: state.db with storage_id %s was claimed at %s and is now at %s (a copy or a move), so its installation_id %s became %s (storage_id unchanged). "+
			"Docker containers, networks and volumes labelled fred.installation_id=%s are no longer this berthd's and it will never adopt, stop or remove them. "+
			"If a berthd still runs from %s they are its own: leave them. Otherwise list them with `docker ps -a --filter label=fred.installation_id=%s` and remove them by hand with `docker rm` (without -v, so their volumes are kept).",
		r.StorageID, r.OldLocation, r.NewLocation, r.OldInstallationID, r.NewInstallationID,
		r.OldInstallationID, r.OldLocation, r.OldInstallationID))
}

// validLocation accepts a recorded or resolved location: non-empty, absolute, clean,
// no NUL, at most PATH_MAX bytes.
func validLocation(loc string) error {
	switch {
	case loc == "":
		return errors.New("it is empty")
	case len(loc) > maxLocationBytes:
		return fmt.Errorf("it is %d bytes, limit %d", len(loc), maxLocationBytes)
	case strings.IndexByte(loc, 0) >= 0:
		return errors.New("it contains NUL")
	case !filepath.IsAbs(loc):
		return errors.New("it is not an absolute path")
	case filepath.Clean(loc) != loc:
		return errors.New("it is not a clean path")
	}
	return nil
}

// resolveLocation is the data dir's location: absolute, every symlink resolved. A
// symlink to a data dir therefore names the same store (and meets its daemon.lock).
func resolveLocation(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve data dir %s: %w", dir, err)
	}
	loc, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve data dir %s: %w", dir, err)
	}
	if err := validLocation(loc); err != nil {
		return "", fmt.Errorf("resolve data dir %s: resolved location %q is unusable: %v", dir, loc, err)
	}
	return loc, nil
}

// stateMeta is what state.db's meta says about identity.
type stateMeta struct {
	id           Identity
	location     string // "" when absent (a store created by an earlier berthd)
	prevID       string // set by a re-key
	prevLocation string // set by a re-key
	rekeyedAt    time.Time
}

// recordedRekey is the last re-key meta records, or nil.
func (st stateMeta) recordedRekey() *Rekey {
	if st.prevID == "" {
		return nil
	}
	return &Rekey{StorageID: st.id.StorageID, OldInstallationID: st.prevID, NewInstallationID: st.id.InstallationID,
		OldLocation: st.prevLocation, NewLocation: st.location, At: st.rekeyedAt}
}

// metaValue reads a meta key, telling "absent" from "present but empty" (bbolt's Get
// does not) and refusing a nested bucket where a value belongs.
func metaValue(meta *bolt.Bucket, key []byte, path string) ([]byte, bool, error) {
	k, v := meta.Cursor().Seek(key)
	if !bytes.Equal(k, key) {
		return nil, false, nil
	}
	if meta.Bucket(key) != nil {
		return nil, true, refuse(ErrCorrupt, "state.db %s has a bucket where meta.%s belongs; refusing to start (file left untouched)", path, key)
	}
	return v, true, nil
}

// readStateMeta reads and validates meta: schema first (a newer layout might keep
// identity elsewhere), then the identity and its location record. Anything present
// but malformed is refused: it is never taken as "another location".
func readStateMeta(tx *bolt.Tx, path string) (stateMeta, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return stateMeta{}, refuse(ErrCorrupt, "state.db %s has no meta bucket; refusing to start (file left untouched)", path)
	}
	if err := readSchema(meta, "state.db", path); err != nil {
		return stateMeta{}, err
	}
	id, err := readMetaIdentity(meta, path)
	if err != nil {
		return stateMeta{}, err
	}
	st := stateMeta{id: id}
	malformed := func(key []byte, raw []byte, why error) error {
		return refuseCause(ErrCorrupt, why, "state.db %s has a malformed meta.%s %q (%v); refusing to start rather than re-key it (file left untouched)", path, key, raw, why)
	}
	raw, ok, err := metaValue(meta, metaLocation, path)
	if err != nil {
		return stateMeta{}, err
	}
	if ok {
		if err := validLocation(string(raw)); err != nil {
			return stateMeta{}, malformed(metaLocation, raw, err)
		}
		st.location = string(raw)
	}
	rawPrev, okPrev, err := metaValue(meta, metaPreviousInstallationID, path)
	if err != nil {
		return stateMeta{}, err
	}
	rawPrevLoc, okPrevLoc, err := metaValue(meta, metaPreviousLocation, path)
	if err != nil {
		return stateMeta{}, err
	}
	rawAt, okAt, err := metaValue(meta, metaRekeyedAt, path)
	if err != nil {
		return stateMeta{}, err
	}
	if okPrev || okPrevLoc || okAt {
		// A re-key writes all three, and the new location with them.
		if !okPrev || !okPrevLoc || !okAt || !ok {
			return stateMeta{}, refuse(ErrCorrupt, "state.db %s has an incomplete re-key record in meta (%s, %s, %s and %s are written together); refusing to start (file left untouched)",
				path, metaPreviousInstallationID, metaPreviousLocation, metaRekeyedAt, metaLocation)
		}
		if !validUUIDv4(string(rawPrev)) {
			return stateMeta{}, malformed(metaPreviousInstallationID, rawPrev, errors.New("not a canonical UUIDv4"))
		}
		if err := validLocation(string(rawPrevLoc)); err != nil {
			return stateMeta{}, malformed(metaPreviousLocation, rawPrevLoc, err)
		}
		at, err := time.Parse(time.RFC3339Nano, string(rawAt))
		if err != nil {
			return stateMeta{}, malformed(metaRekeyedAt, rawAt, errors.New("not an RFC 3339 time"))
		}
		st.prevID, st.prevLocation, st.rekeyedAt = string(rawPrev), string(rawPrevLoc), at
	}
	return st, nil
}

// identityAction is what Open has to do to bind the identity to where it found it.
type identityAction int

const (
	identityCurrent   identityAction = iota // meta, marker and location agree
	identityBind                            // an earlier berthd's store: record its location, once
	identityRekey                           // found elsewhere than it was claimed: new installation id
	identityRepublish                       // a re-key committed, the marker not yet rewritten: finish it
)

// planIdentity compares meta, the marker and the current location. Every mismatch
// other than the three it resolves is refused, files untouched.
func planIdentity(st stateMeta, marker Identity, cur, statePath, markerPath string) (identityAction, error) {
	if st.id.StorageID != marker.StorageID {
		return 0, refuse(ErrForeign, "state.db %s has storage_id %s but marker %s says %s: they belong to different installations; refusing to start (files left untouched)", statePath, st.id.StorageID, markerPath, marker.StorageID)
	}
	if st.id.InstallationID == marker.InstallationID {
		switch {
		case st.location == "":
			return identityBind, nil
		case st.location == cur:
			return identityCurrent, nil
		default:
			return identityRekey, nil
		}
	}
	// The exact state a crash between the re-key commit and the marker rewrite
	// leaves: the marker still holds the id meta re-keyed away from, here.
	if st.location == cur && st.prevID != "" && marker.InstallationID == st.prevID {
		return identityRepublish, nil
	}
	return 0, refuse(ErrForeign, "state.db %s has installation_id %s but marker %s says %s: they belong to different installations; refusing to start (files left untouched)", statePath, st.id.InstallationID, markerPath, marker.InstallationID)
}

// sameIdentityRecord reports whether meta still holds what was validated.
func sameIdentityRecord(a, b stateMeta) bool {
	return a.id.StorageID == b.id.StorageID && a.id.InstallationID == b.id.InstallationID && a.location == b.location
}

// bindLocationTx records the location of an earlier berthd's store, if meta still
// holds the validated id and no location.
func bindLocationTx(tx *bolt.Tx, path string, want stateMeta, cur string) error {
	got, err := readStateMeta(tx, path)
	if err != nil {
		return err
	}
	if !sameIdentityRecord(got, want) || got.location != "" {
		return errIdentityRaced
	}
	if err := tx.Bucket(bucketMeta).Put(metaLocation, []byte(cur)); err != nil {
		return fmt.Errorf("write meta %s: %w", metaLocation, err)
	}
	return nil
}

// rekeyTx is the compare-and-swap: if meta still holds the validated installation id
// and location, it records newID at cur and keeps the old pair for the operator.
func rekeyTx(tx *bolt.Tx, path string, want stateMeta, newID, cur string, at time.Time) error {
	got, err := readStateMeta(tx, path)
	if err != nil {
		return err
	}
	if !sameIdentityRecord(got, want) {
		return errIdentityRaced
	}
	meta := tx.Bucket(bucketMeta)
	for _, kv := range [][2][]byte{
		{metaInstallationID, []byte(newID)},
		{metaLocation, []byte(cur)},
		{metaPreviousInstallationID, []byte(want.id.InstallationID)},
		{metaPreviousLocation, []byte(want.location)},
		{metaRekeyedAt, []byte(at.UTC().Format(time.RFC3339Nano))},
	} {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return fmt.Errorf("write meta %s: %w", kv[0], err)
		}
	}
	return nil
}
