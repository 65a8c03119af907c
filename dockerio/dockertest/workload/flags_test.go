package main

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

func itoa(i int) string { return strconv.Itoa(i) }

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseFlags_EnvGivesDefaultsAndCommandLineWins(t *testing.T) {
	fs := newFlagSet("serve", io.Discard)
	port := fs.Int("port", 8080, "")
	after := fs.Duration("exit-after", 0, "")
	ignore := fs.Bool("ignore-sigterm", false, "")
	lookup := env(map[string]string{
		"WORKLOAD_PORT":           "9000",
		"WORKLOAD_EXIT_AFTER":     "3s",
		"WORKLOAD_IGNORE_SIGTERM": "true",
	})
	if err := parseFlags(fs, []string{"-port", "9100"}, nil, lookup); err != nil {
		t.Fatal(err)
	}
	if *port != 9100 || *after != 3*time.Second || !*ignore {
		t.Fatalf("port=%d exit-after=%s ignore-sigterm=%v, want 9100 3s true", *port, *after, *ignore)
	}
}

func TestParseFlags_AliasReadsSharedVariable(t *testing.T) {
	fs := newFlagSet("exit", io.Discard)
	code := fs.Int("code", 0, "")
	lookup := env(map[string]string{"WORKLOAD_EXIT_CODE": "5", "WORKLOAD_CODE": "6"})
	if err := parseFlags(fs, nil, map[string]string{"code": "WORKLOAD_EXIT_CODE"}, lookup); err != nil {
		t.Fatal(err)
	}
	if *code != 5 {
		t.Fatalf("code = %d, want 5 from WORKLOAD_EXIT_CODE", *code)
	}
}

func TestParseFlags_BadEnvValueIsAnErrorNamingTheVariable(t *testing.T) {
	fs := newFlagSet("serve", io.Discard)
	fs.Int("port", 8080, "")
	err := parseFlags(fs, nil, nil, env(map[string]string{"WORKLOAD_PORT": "eighty"}))
	if err == nil || !strings.Contains(err.Error(), "WORKLOAD_PORT") {
		t.Fatalf("err = %v, want one naming WORKLOAD_PORT", err)
	}
}

func TestFileWrites_RepeatableAndRejectsRelativePaths(t *testing.T) {
	var w fileWrites
	for _, v := range []string{"/data/a=x=y", "/tmp/b="} {
		if err := w.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	want := fileWrites{{"/data/a", "x=y"}, {"/tmp/b", ""}}
	if len(w) != 2 || w[0] != want[0] || w[1] != want[1] {
		t.Fatalf("writes = %+v, want %+v", w, want)
	}
	for _, bad := range []string{"data/a=x", "/data/a"} {
		if err := w.Set(bad); err == nil {
			t.Fatalf("Set(%q) accepted", bad)
		}
	}
}
