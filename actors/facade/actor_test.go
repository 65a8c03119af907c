package facade_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/facade"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

var secret = []byte("facade-test-secret-31c9e0a7")

// echo answers 200 with the body it read.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	_, _ = w.Write(b)
})

// ignoreBody answers at once without reading the body, like /health.
var ignoreBody = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// start runs the real facade actor in a real tree on 127.0.0.1 ports of the
// kernel's choosing and returns the API and debug addresses it listens on.
func start(t *testing.T, set facade.Settings, api, dbg http.Handler) (string, string) {
	t.Helper()
	set.ListenAddr, set.DebugListenAddr, set.ShutdownGrace = "127.0.0.1:0", "127.0.0.1:0", time.Second
	var tree *supervisors.Tree
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
		Children: func(tr *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{{Name: "facade", Kind: "facade", Producer: facade.New(&facade.Deps{
				Tree: tr, API: api, Debug: dbg, Settings: &set, Log: zerolog.Nop()})}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	addr := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := supervisors.Ask(context.Background(), tree, supervisors.RootPath+"/facade", time.Second,
			func(r chan<- messages.NodeInfo) any { return &messages.Describe{Reply: r} })
		if got := addr.FindAllString(info.State, -1); err == nil && len(got) == 2 {
			return got[0], got[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the facade never listened")
	return "", ""
}

func verifier() http.Handler { return (&hmac.Verifier{Secret: secret}).Middleware(echo) }

// openFor sends a POST head announcing length body bytes, then one body byte
// every every, and returns how long the server kept the connection open.
func openFor(t *testing.T, addr, path string, signed bool, length int, every time.Duration) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: berthd\r\nContent-Length: %d\r\n", path, length)
	if signed {
		head += callback.Header + ": " + callback.Sign(secret, http.MethodPost, path, []byte("x"), time.Now()) + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		close(closed)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	giveUp := time.After(60 * time.Second)
	for {
		select {
		case <-closed:
			return time.Since(start)
		case <-giveUp:
			return time.Since(start)
		case <-tick.C:
			_, _ = conn.Write([]byte{'x'})
		}
	}
}

// Measured before: slow-body connections stayed open past 60 s with only a header
// timeout set. With the production defaults they are cut off well before.
func TestFacade_TricklingClient_IsDisconnectedWellBefore60s(t *testing.T) {
	api, _ := start(t, facade.Settings{}, verifier(), ignoreBody)
	for _, signed := range []bool{true, false} {
		if took := openFor(t, api, "/provision", signed, 1000, 5*time.Second); took >= 20*time.Second {
			t.Errorf("signed=%v: connection held for %s, want < 20 s", signed, took)
		}
	}
}

func TestFacade_NormalClientWith2MiBBody_Works(t *testing.T) {
	api, _ := start(t, facade.Settings{}, verifier(), ignoreBody)
	body := bytes.Repeat([]byte{'b'}, 2<<20)
	req, _ := http.NewRequest(http.MethodPost, "http://"+api+"/update", bytes.NewReader(body))
	req.Header.Set(callback.Header, callback.Sign(secret, http.MethodPost, "/update", body, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("%d, %d bytes echoed; want 200 and the body", resp.StatusCode, len(got))
	}
}

// ReadTimeout bounds a request whose handler never reads the body: the server's
// own drain of it is cut off too.
func TestFacade_ReadTimeout_BoundsABodyNoHandlerReads(t *testing.T) {
	api, dbg := start(t, facade.Settings{ReadTimeout: time.Second}, ignoreBody, ignoreBody)
	for _, addr := range []string{api, dbg} {
		if took := openFor(t, addr, "/health", false, 1000, 200*time.Millisecond); took >= 5*time.Second {
			t.Errorf("%s: connection held for %s with a 1 s ReadTimeout", addr, took)
		}
	}
}

func TestFacade_HeadersOverMaxHeaderBytes_431OnBothListeners(t *testing.T) {
	api, dbg := start(t, facade.Settings{}, ignoreBody, ignoreBody)
	for _, addr := range []string{api, dbg} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/health", nil)
		req.Header.Set("X-Padding", strings.Repeat("p", facade.DefaultMaxHeaderBytes+8<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: %d for %d header bytes, want 431", addr, resp.StatusCode, facade.DefaultMaxHeaderBytes+8<<10)
		}
	}
}

func TestFacade_IdleKeepAliveConnection_IsClosedAfterIdleTimeout(t *testing.T) {
	api, _ := start(t, facade.Settings{IdleTimeout: 300 * time.Millisecond}, ignoreBody, ignoreBody)
	conn, err := net.Dial("tcp", api)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: berthd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("read after the response: %v, want EOF (server closed the idle connection)", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("idle connection closed after %s, want about 300 ms", took)
	}
}
