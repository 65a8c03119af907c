package config

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CallbackSecretFile is the name, inside data_dir, of the generated callback secret.
const CallbackSecretFile = "callback-secret"

// maxSecretFileBytes bounds what is read from the secret file; a key is far smaller.
const maxSecretFileBytes = 4096

// CallbackSecret resolves the HMAC secret: the configured callback_secret when set
// (path ""); otherwise, outside production_mode, the content of
// <data_dir>/callback-secret, created on first use with 32 random bytes
// hex-encoded (64 characters, used as the key bytes as is) and mode 0600. An
// existing file must be a regular file, not a symlink, with mode exactly 0600 and
// at least 32 bytes (a trailing newline is ignored); it is never rewritten. The
// returned path is for logging; never log the secret.
func CallbackSecret(c *Config) (secret []byte, path string, err error) {
	if c.CallbackSecret != "" {
		return []byte(c.CallbackSecret), "", nil
	}
	if c.ProductionMode {
		return nil, "", errors.New("callback_secret is required in production_mode; refusing to generate one")
	}
	if c.DataDir == "" {
		return nil, "", errors.New("data_dir is empty; nowhere to keep a generated callback secret")
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create data_dir %s: %w", c.DataDir, err)
	}
	path = filepath.Join(c.DataDir, CallbackSecretFile)
	secret, err = readSecretFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret, err = createSecretFile(path)
	}
	if err != nil {
		return nil, path, err
	}
	if c.CallbackSecretNext != "" && hmacKeysEquivalent(secret, []byte(c.CallbackSecretNext)) {
		return nil, path, fmt.Errorf("callback_secret_next equals the callback secret in %s; it must differ", path)
	}
	return secret, path, nil
}

// readSecretFile reads an existing secret file without following a symlink and
// refuses anything but a single regular file readable by its owner only.
func readSecretFile(path string) ([]byte, error) {
	// O_NONBLOCK: a FIFO planted at the path must not hang startup.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("callback secret %s is a symbolic link; refusing it (replace it with a regular file, mode 0600)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open callback secret: %w", err)
	}
	defer f.Close()

	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat callback secret %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("callback secret %s is not a regular file (%s); refusing it", path, info.Mode().Type())
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		return nil, fmt.Errorf("callback secret %s has mode %04o, want 0600; refusing it (chmod 600 it if it is yours)", path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read callback secret %s: %w", path, err)
	}
	if len(data) > maxSecretFileBytes {
		return nil, fmt.Errorf("callback secret %s is larger than %d bytes; refusing it", path, maxSecretFileBytes)
	}
	secret := bytes.TrimRight(data, "\r\n")
	if len(secret) < minSecretBytes {
		return nil, fmt.Errorf("callback secret %s holds %d bytes, fewer than %d; delete it to have a new one generated", path, len(secret), minSecretBytes)
	}
	return secret, nil
}

// createSecretFile writes a fresh secret to a temporary file and hard-links it
// into place, so the file appears complete or not at all, and a concurrent
// creator loses cleanly (link refuses to replace) and reads the winner's secret.
func createSecretFile(path string) ([]byte, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate callback secret: %w", err)
	}
	secret := []byte(hex.EncodeToString(raw))

	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+CallbackSecretFile+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create callback secret in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp asks for 0600 but the umask may strip bits; the reader wants exactly 0600.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if _, err := tmp.Write(secret); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readSecretFile(path)
		}
		return nil, fmt.Errorf("publish callback secret %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return secret, nil
}

// syncDir makes the new directory entry durable, so a crash cannot leave a
// daemon that signed callbacks with a secret that vanished.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
