package facade_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/facade"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// A debug request that would run forever (the event stream) ends as the listener
// shuts down; an API request in flight still finishes.
func TestFacade_Shutdown_EndsDebugRequestsAndLetsAPIRequestsFinish(t *testing.T) {
	streaming := make(chan struct{})
	ended := make(chan struct{})
	dbg := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(streaming)
		<-r.Context().Done()
		close(ended)
	})
	apiStarted := make(chan struct{})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(apiStarted)
		time.Sleep(500 * time.Millisecond)
		if r.Context().Err() != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	set := facade.Settings{ListenAddr: "127.0.0.1:0", DebugListenAddr: "127.0.0.1:0", ShutdownGrace: 30 * time.Second}
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
		Children: func(tr *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{{Name: "facade", Kind: "facade", Producer: facade.New(&facade.Deps{
				Tree: tr, API: api, Debug: dbg, Settings: &set, Log: zerolog.Nop()})}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for deadline := time.Now().Add(10 * time.Second); len(addrs) != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the facade never listened")
		}
		info, err := supervisors.Ask(context.Background(), tree, supervisors.RootPath+"/facade", time.Second,
			func(r chan<- messages.NodeInfo) any { return &messages.Describe{Reply: r} })
		if err == nil {
			addrs = regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(info.State, -1)
		}
	}
	resp, err := http.Get("http://" + addrs[1] + "/debug/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	apiDone := make(chan string, 1)
	go func() {
		r, err := http.Get("http://" + addrs[0] + "/provisions")
		if err != nil {
			apiDone <- err.Error()
			return
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		apiDone <- string(b)
	}()
	<-apiStarted

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tree.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the drain took %s: an open debug stream held it up", took)
	}
	select {
	case <-ended:
	default:
		t.Fatal("the debug request's context was not canceled")
	}
	if got := <-apiDone; got != "done" {
		t.Fatalf("the API request in flight answered %q, want it finished", got)
	}
}
