package fredv013

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const lease = "0f02ec1e-e2e7-4534-9481-d4f87e6b84a4"

// writeFred makes fred's four files in dir, each with its bucket and the rows
// given for it (file → key → JSON).
func writeFred(t *testing.T, dir string, rows map[string]map[string]string, extraBucket string) {
	t.Helper()
	for file, bucket := range buckets {
		db, err := bolt.Open(filepath.Join(dir, file), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte(bucket))
			if err != nil {
				return err
			}
			for k, v := range rows[file] {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			if extraBucket != "" && file == ReleasesFile {
				_, err = tx.CreateBucket([]byte(extraBucket))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
	}
}

// Rows as the real fred v0.13 wrote them (captured from the daemon in peers/).
var fredRows = map[string]map[string]string{
	CallbacksFile:   {lease: `{"lease_uuid":"` + lease + `","callback_url":"http://127.0.0.1:1/callbacks/provision?operation_id=efc88487-5cb0-4f6a-a291-888e45b853a7","success":true,"status":"success","backend":"docker","created_at":"2026-12-07T15:45:20.645842327Z"}`},
	DiagnosticsFile: {lease: `{"lease_uuid":"` + lease + `","provider_uuid":"p","tenant":"t","error":"compose up failed","reason":"ContainerExited","message":"container creation failed","fail_count":1,"created_at":"2026-12-07T15:45:19.774405626Z"}`},
	ReleasesFile:    {lease: `[{"version":1,"manifest":"eyJpbWFnZSI6IngifQ==","image":"stack","status":"active","created_at":"2026-12-07T15:45:20.47258189Z"}]`},
	RetentionFile:   {lease: `{"original_lease_uuid":"` + lease + `","tenant":"t","provider_uuid":"p","items":[{"sku":"docker-small","quantity":1,"service_name":"app"}],"stack_manifest":{"services":{"app":{"image":"x"}}},"callback_url":"http://cb","retained_volume_names":["fred-retained-` + lease + `-app-0"],"status":"active","generation":0,"created_at":"2026-12-07T15:45:36.84626263Z","restoring_since":"0001-01-01T00:00:00Z","reaping_since":"0001-01-01T00:00:00Z"}`},
}

func TestRead_DecodesFredsRowsAndChangesNoFile(t *testing.T) {
	dir := t.TempDir()
	writeFred(t, dir, fredRows, "")
	before := stamps(t, dir)
	s, err := Read(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Callbacks[lease].Status != "success" || s.Diagnostics[lease].FailCount != 1 || string(s.Releases[lease][0].Manifest) != `{"image":"x"}` ||
		s.Retentions[lease].RetainedVolumeNames[0] != "fred-retained-"+lease+"-app-0" {
		t.Fatalf("decoded %+v", s)
	}
	if after := stamps(t, dir); after != before {
		t.Fatalf("files changed by a read-only read:\n%s\n%s", before, after)
	}
}

func TestRead_RefusesWhatFredNeverWrote(t *testing.T) {
	for name, tc := range map[string]struct {
		file, key, row, bucket string
	}{
		"unknown field":   {ReleasesFile, lease, `[{"version":1,"status":"active","created_at":"2026-12-07T15:45:20Z","pinned":true}]`, ""},
		"key not its row": {CallbacksFile, "other", fredRows[CallbacksFile][lease], ""},
		"not JSON":        {DiagnosticsFile, lease, `{"lease_uuid":`, ""},
		"trailing data":   {RetentionFile, lease, fredRows[RetentionFile][lease] + `{}`, ""},
		"extra bucket":    {ReleasesFile, lease, fredRows[ReleasesFile][lease], "leases"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			rows := map[string]map[string]string{tc.file: {tc.key: tc.row}}
			writeFred(t, dir, rows, tc.bucket)
			if _, err := Read(dir, time.Second); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Read: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestRead_AFileFredHoldsIsLocked(t *testing.T) {
	dir := t.TempDir()
	writeFred(t, dir, fredRows, "")
	fred, err := bolt.Open(filepath.Join(dir, ReleasesFile), 0o600, nil) // fred's exclusive open
	if err != nil {
		t.Fatal(err)
	}
	defer fred.Close()
	if _, err := Read(dir, 200*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Fatalf("Read while fred holds releases.db: %v, want ErrLocked", err)
	}
}

func TestRead_AMissingFileIsNamed(t *testing.T) {
	dir := t.TempDir()
	writeFred(t, dir, fredRows, "")
	if err := os.Remove(filepath.Join(dir, RetentionFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir, time.Second); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Read without retention.db: %v", err)
	}
}

// stamps are the files' contents' hashes, modes and modification times.
func stamps(t *testing.T, dir string) string {
	t.Helper()
	out := ""
	for _, file := range []string{CallbacksFile, DiagnosticsFile, ReleasesFile, RetentionFile} {
		fi, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("%s %x %s %s\n", file, sha256.Sum256(raw), fi.Mode(), fi.ModTime())
	}
	return out
}
