package lease

import (
	"time"

	"github.com/berth-dev/berth/messages"
)

// ReleaseForTest is the release a provision of s journals.
func (s *Spec) ReleaseForTest(now time.Time) Release { return s.release(now, false) }

// DebugServicesForTest is what a lease actor answers DebugLease with for st.
func DebugServicesForTest(spec *Spec, st *State) []messages.DebugService {
	return debugServices(spec, st)
}
