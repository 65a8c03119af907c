package lease

import "time"

// ReleaseForTest is the release a provision of s journals.
func (s *Spec) ReleaseForTest(now time.Time) Release { return s.release(now) }
