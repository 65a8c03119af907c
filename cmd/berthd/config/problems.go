package config

import (
	"fmt"
	"strings"
)

// Problems is every configuration problem Load found, each "<key>: <what is wrong>".
// It is never empty when returned.
type Problems struct{ List []string }

// Error lists the problems, one per line.
func (p *Problems) Error() string { return strings.Join(p.List, "\n") }

// problemSet collects problems while loading. A key whose value could not be
// decoded is marked bad so the rules that read it stay quiet: one wrong value
// yields one message, not a type error plus a range error about its zero value.
type problemSet struct {
	list []string
	bad  map[string]bool
}

func newProblemSet() *problemSet { return &problemSet{bad: map[string]bool{}} }

// add records a problem about key unless key already failed to decode.
func (ps *problemSet) add(key, format string, args ...any) {
	if ps.bad[key] {
		return
	}
	ps.list = append(ps.list, key+": "+fmt.Sprintf(format, args...))
}

// positive records "must be positive" about key unless v is.
func (ps *problemSet) positive(key string, v int64) {
	if v <= 0 {
		ps.add(key, "must be positive, got %d", v)
	}
}

// badValue records a decode problem about key and silences later rules on it.
func (ps *problemSet) badValue(key, format string, args ...any) {
	ps.add(key, format, args...)
	ps.bad[key] = true
}

func (ps *problemSet) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &Problems{List: ps.list}
}
