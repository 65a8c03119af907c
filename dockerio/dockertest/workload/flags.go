package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// envName is the environment variable that feeds a flag: WORKLOAD_ + the flag
// name upper-cased with dashes turned into underscores.
func envName(flagName string) string {
	return "WORKLOAD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags applies WORKLOAD_* environment defaults to fs, then parses args on
// top of them. aliases maps a flag name to the environment variable it reads
// when that differs from envName (so `exit -code` reads WORKLOAD_EXIT_CODE,
// like serve's -exit-code).
func parseFlags(fs *flag.FlagSet, args []string, aliases map[string]string, lookup func(string) (string, bool)) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if alias, ok := aliases[f.Name]; ok {
			name = alias
		}
		v, ok := lookup(name)
		if !ok || envErr != nil {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = fmt.Errorf("%s=%q: %w", name, v, err)
		}
	})
	if envErr != nil {
		return envErr
	}
	return fs.Parse(args)
}

// newFlagSet returns a flag set for a mode that reports errors to stderr
// instead of exiting the process.
func newFlagSet(mode string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseOrReport parses and prints the error; ok is false when the mode must
// exit with code 2 (bad usage).
func parseOrReport(fs *flag.FlagSet, args []string, aliases map[string]string, stderr io.Writer) bool {
	if err := parseFlags(fs, args, aliases, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "workload %s: %v\n", fs.Name(), err)
		return false
	}
	return true
}

// fileWrites is the repeatable -write P=content flag.
type fileWrites []fileWrite

type fileWrite struct {
	path    string
	content string
}

func (w *fileWrites) String() string {
	parts := make([]string, 0, len(*w))
	for _, fw := range *w {
		parts = append(parts, fw.path+"="+fw.content)
	}
	return strings.Join(parts, ",")
}

func (w *fileWrites) Set(v string) error {
	path, content, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("want /absolute/path=content, got %q", v)
	}
	*w = append(*w, fileWrite{path: path, content: content})
	return nil
}
