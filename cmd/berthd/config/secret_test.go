package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// devConfig is a loaded default config whose data_dir is a fresh directory.
func devConfig(t *testing.T) *Config {
	t.Helper()
	c := mustLoad(t, "")
	c.DataDir = filepath.Join(t.TempDir(), "var", "berth")
	return c
}

func TestCallbackSecret_GeneratedOnce_64Hex_Mode0600_SameOnSecondCall(t *testing.T) {
	c := devConfig(t)
	first, path, err := CallbackSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(c.DataDir, "callback-secret") {
		t.Fatalf("path = %q", path)
	}
	if len(first) != 64 {
		t.Fatalf("secret is %d chars, want 64", len(first))
	}
	if _, err := hex.DecodeString(string(first)); err != nil {
		t.Fatalf("secret is not hex: %v", err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
		t.Fatalf("file mode = %v, want regular 0600", info.Mode())
	}
	onDisk, _ := os.ReadFile(path)
	if !bytes.Equal(onDisk, first) {
		t.Fatal("returned secret differs from the file content")
	}

	second, path2, err := CallbackSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if path2 != path || !bytes.Equal(second, first) {
		t.Fatal("second call returned a different secret or path")
	}
	entries, _ := os.ReadDir(c.DataDir)
	if len(entries) != 1 {
		t.Fatalf("data dir holds %d entries, want only callback-secret (temp file left behind?)", len(entries))
	}
}

func TestCallbackSecret_TwoDataDirs_DifferentSecrets(t *testing.T) {
	a, _, errA := CallbackSecret(devConfig(t))
	b, _, errB := CallbackSecret(devConfig(t))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two generated secrets are equal")
	}
}

func TestCallbackSecret_ConcurrentFirstUse_AllCallersAgree(t *testing.T) {
	c := devConfig(t)
	const n = 8
	secrets := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secrets[i], _, errs[i] = CallbackSecret(c)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if !bytes.Equal(secrets[i], secrets[0]) {
			t.Fatalf("caller %d got a different secret", i)
		}
	}
}

func TestCallbackSecret_SymlinkRefused_TargetUntouched(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	content := []byte(strings.Repeat("a", 64))
	if err := os.WriteFile(target, content, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(c.DataDir, "callback-secret")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	secret, _, err := CallbackSecret(c)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("symlink accepted or wrong error: secret=%d bytes err=%v", len(secret), err)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, content) {
		t.Fatal("symlink target was modified")
	}
}

func TestCallbackSecret_DanglingSymlinkRefused(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "not-yet")
	if err := os.Symlink(target, filepath.Join(c.DataDir, "callback-secret")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CallbackSecret(c); err == nil {
		t.Fatal("dangling symlink accepted")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatal("a secret was written through the dangling symlink")
	}
}

func TestCallbackSecret_Mode0644Refused_FileUntouched(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.DataDir, "callback-secret")
	content := []byte(strings.Repeat("b", 64))
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // WriteFile's mode is subject to umask
		t.Fatal(err)
	}
	_, _, err := CallbackSecret(c)
	if err == nil || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("mode 0644 accepted or wrong error: %v", err)
	}
	info, _ := os.Stat(path)
	got, _ := os.ReadFile(path)
	if info.Mode().Perm() != 0o644 || !bytes.Equal(got, content) {
		t.Fatal("the refused file was changed")
	}
}

func TestCallbackSecret_NotRegularFileRefused(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(filepath.Join(c.DataDir, "callback-secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CallbackSecret(c); err == nil {
		t.Fatal("a directory was accepted as the secret file")
	}
}

func TestCallbackSecret_ShortFileRefused_NotRewritten(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.DataDir, "callback-secret")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // e.g. a crash mid-write by another tool
		t.Fatal(err)
	}
	if _, _, err := CallbackSecret(c); err == nil || !strings.Contains(err.Error(), "fewer than 32") {
		t.Fatalf("empty secret file accepted or wrong error: %v", err)
	}
	if got, _ := os.ReadFile(path); len(got) != 0 {
		t.Fatal("the short file was rewritten")
	}
}

func TestCallbackSecret_OperatorFileWithNewline_Trimmed(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.DataDir, "callback-secret"), []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := CallbackSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != testSecret {
		t.Fatalf("secret = %q, want %q", got, testSecret)
	}
}

func TestCallbackSecret_ConfiguredWins_PathEmpty_NoFile(t *testing.T) {
	c := mustLoad(t, "callback_secret: "+testSecret)
	c.DataDir = filepath.Join(t.TempDir(), "data")
	got, path, err := CallbackSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != testSecret || path != "" {
		t.Fatalf("got %q path %q, want the configured secret and path \"\"", got, path)
	}
	if _, err := os.Stat(c.DataDir); !os.IsNotExist(err) {
		t.Fatal("a configured secret still touched data_dir")
	}
}

func TestCallbackSecret_ProductionWithoutSecret_Refused(t *testing.T) {
	c := devConfig(t)
	c.ProductionMode = true
	if _, _, err := CallbackSecret(c); err == nil {
		t.Fatal("production mode generated a secret")
	}
	if _, err := os.Stat(c.DataDir); !os.IsNotExist(err) {
		t.Fatal("production refusal still created data_dir")
	}
}

func TestCallbackSecret_FileEqualToNext_Refused(t *testing.T) {
	c := devConfig(t)
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.DataDir, "callback-secret"), []byte(testSecretNext), 0o600); err != nil {
		t.Fatal(err)
	}
	c.CallbackSecretNext = testSecretNext
	if _, _, err := CallbackSecret(c); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Fatalf("secret equal to callback_secret_next accepted or wrong error: %v", err)
	}
}

func TestExistingCallbackSecret_ReadsButNeverCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := &Config{DataDir: dir}
	if _, _, err := ExistingCallbackSecret(c); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no secret yet: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ExistingCallbackSecret created the data dir: %v", err)
	}
	generated, _, err := CallbackSecret(c)
	if err != nil {
		t.Fatal(err)
	}
	got, path, err := ExistingCallbackSecret(c)
	if err != nil || string(got) != string(generated) || path != filepath.Join(dir, CallbackSecretFile) {
		t.Fatalf("ExistingCallbackSecret = %q, %s, %v; want the generated one", got, path, err)
	}
	c.CallbackSecret = "configured-secret-configured-secret"
	if got, path, err := ExistingCallbackSecret(c); err != nil || string(got) != "configured-secret-configured-secret" || path != "" {
		t.Fatalf("configured: %q, %q, %v", got, path, err)
	}
}
