package lease

import (
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"
)

// FaultyDiagnostics is a diagnostics store whose writes fail on demand, writing
// nothing (as supervisors.FaultyStore is for journals): how the tests make a
// failure capture's write fail, here and through berthd's test seam.
type FaultyDiagnostics struct {
	Diagnostics
	Failing atomic.Bool  // Put refuses while set
	Refused atomic.Int64 // Puts refused so far
}

// Put stores the capture unless Failing is set.
func (f *FaultyDiagnostics) Put(id string, at time.Time, blob json.RawMessage) error {
	if f.Failing.Load() {
		f.Refused.Add(1)
		return errors.New("injected: diagnostics.db write failed")
	}
	return f.Diagnostics.Put(id, at, blob)
}
