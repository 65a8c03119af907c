package takeover

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
)

// What the preflight cannot read is refused by name, and nothing is judged:
// no fred files where -v013-dir says, something on fred's port, a data dir
// already used, Docker not answering.
func TestPreflight_WhatItCannotReadIsRefusedByName(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "state.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, ev := Preflight(context.Background(), Inputs{FredDir: filepath.Join(t.TempDir(), "nothing"), DataDir: data,
		ListenAddr: ln.Addr().String(), Now: time.Now(), Rules: rules(),
		Objects: func(context.Context) ([]dockerio.FredObject, error) { return nil, context.DeadlineExceeded },
		Images:  func(context.Context, []string) (map[string]dockerio.FredImage, error) { return nil, nil }})
	if ev != nil || r.Ready() {
		t.Fatalf("judged what it could not read: %+v", r)
	}
	got := map[string]bool{}
	for _, f := range r.Host {
		got[f.Code] = true
	}
	for _, code := range []string{StoreMissing, FredRunning, DataDirNotEmpty, DockerUnavailable} {
		if !got[code] {
			t.Fatalf("no %s among %+v", code, r.Host)
		}
	}
}
