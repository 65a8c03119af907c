package messages

import "strconv"

// The names of a lease's managed volumes on the volume root (dockerio/volumes
// keeps them there; the lease, the registry and the reaper name them).

// VolumeName is the managed volume of one instance of a stateful service.
func VolumeName(lease, service string, index int) string {
	return "fred-" + lease + "-" + service + "-" + strconv.Itoa(index)
}

// RetainedVolumeName is that volume's name while retained after its lease closed.
func RetainedVolumeName(lease, service string, index int) string {
	return "fred-retained-" + lease + "-" + service + "-" + strconv.Itoa(index)
}

// ScratchVolumeName is the quota-capped scratch volume holding the seeded
// writable paths of one instance of a diskless service: never retained.
func ScratchVolumeName(lease, service string, index int) string {
	return "fred-scratch-" + lease + "-" + service + "-" + strconv.Itoa(index)
}
