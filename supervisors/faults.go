package supervisors

import (
	"errors"
	"sync"

	"github.com/berth-dev/berth/persistence"
)

// FaultyStore is the store's fault-injecting twin (as Nomad's client state DB
// has an error implementation): every method is the real store's, but Commit
// fails on demand, writing nothing, so a test can make any journaled actor's
// commit fail and watch its documented reaction.
type FaultyStore struct {
	*persistence.Store

	mu     sync.Mutex
	fail   func(persistence.Write) bool
	err    error
	failed int
}

// ErrInjected is the default injected commit failure.
var ErrInjected = errors.New("injected commit failure")

// FailCommits makes every later commit that match accepts (nil: every commit)
// fail with err (nil: ErrInjected), until Heal.
func (f *FaultyStore) FailCommits(match func(persistence.Write) bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		err = ErrInjected
	}
	if match == nil {
		match = func(persistence.Write) bool { return true }
	}
	f.fail, f.err = match, err
}

// Heal stops failing commits.
func (f *FaultyStore) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = nil
}

// Failed is how many commits were failed.
func (f *FaultyStore) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Commit fails when told to, else commits to the real store.
func (f *FaultyStore) Commit(w persistence.Write) (persistence.Committed, error) {
	f.mu.Lock()
	if f.fail != nil && f.fail(w) {
		f.failed++
		err := f.err
		f.mu.Unlock()
		return persistence.Committed{}, err
	}
	f.mu.Unlock()
	return f.Store.Commit(w)
}

// Streams is a Write's streams, for matching (e.g. fail only "registry").
func Streams(w persistence.Write) []string {
	out := make([]string, 0, len(w.Appends))
	for _, a := range w.Appends {
		out = append(out, a.Stream)
	}
	return out
}
