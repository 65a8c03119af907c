package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/moby/profiles/seccomp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The tenant seccomp profile (seed: Container Hardening, "Tenant seccomp
// profile"): Docker's default profile — the Go value moby/profiles/seccomp
// ships, the version docker v28.5.2 builds against — minus what lets a tenant
// widen its sandbox. Inside a btrfs volume, an unprivileged
// BTRFS_IOC_SUBVOL_CREATE makes a subvolume with a qgroup of its own, outside
// the volume's quota (measured: 20 MiB written into an 8 MiB volume); the
// subvolume and snapshot creation ioctls are refused with EPERM.
//
// How it is refused was measured on this engine (Docker 20.10.24, runc 1.1.5,
// libseccomp 2.5.4), and shapes the profile:
//   - an errno rule matching the ioctl's request argument, added next to the
//     default profile's unconditional allow of ioctl (before it or after it),
//     is dropped by libseccomp: the unconditional rule wins, the ioctl runs;
//   - one allow rule with a "!=" comparison per refused request is split by
//     runc into one rule per comparison (runc ORs comparisons of one argument),
//     which together allow everything;
//   - an always-true masked comparison next to errno rules wins likewise.
//
// So ioctl leaves the unconditional list and is allowed by allow rules only,
// whose union is every request but the refused ones (ioctlCover); the
// profile's default action (errno EPERM) answers the rest. The comparisons
// mask the low 32 bits: the kernel reads the request as an unsigned int, so a
// caller setting high bits of the 64-bit register would pass a full-width
// comparison (measured: 0xffffffff5000940e creates a subvolume on the host).

// refusedIoctls are the btrfs ioctls (linux/btrfs.h, _IOW(0x94, nr, 4096-byte
// args), the same number on every ABI) that create a subvolume or snapshot.
var refusedIoctls = []uint32{
	0x50009401, // BTRFS_IOC_SNAP_CREATE
	0x5000940e, // BTRFS_IOC_SUBVOL_CREATE
	0x50009417, // BTRFS_IOC_SNAP_CREATE_V2
	0x50009418, // BTRFS_IOC_SUBVOL_CREATE_V2
}

// seccompMarkerKey marks the security option Compose carries for the tenant
// profile: Compose reads any "seccomp=" value as a file name, so the service
// carries this marker (with the profile's digest, so a changed profile changes
// the Compose config hash) and composeAPI.ContainerCreate swaps it for the
// inline profile. Docker refuses the marker itself: a create that missed the
// swap fails instead of running without the profile.
const seccompMarkerKey = "berth-seccomp"

type tenantProfile struct {
	json   string // the profile, compact
	marker string // seccompMarkerKey=<digest>
}

var tenantSeccomp = sync.OnceValue(func() tenantProfile {
	b, err := json.Marshal(buildTenantProfile())
	if err != nil {
		panic(fmt.Sprintf("marshal the tenant seccomp profile: %v", err)) // a Go value: cannot fail
	}
	sum := sha256.Sum256(b)
	return tenantProfile{json: string(b), marker: seccompMarkerKey + "=" + hex.EncodeToString(sum[:8])}
})

// tenantSeccompOpt is the service's security option for the tenant profile.
func tenantSeccompOpt() string { return tenantSeccomp().marker }

// buildTenantProfile is Docker's default profile with ioctl allowed for every
// request but the refusedIoctls.
func buildTenantProfile() *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	p.Syscalls = slices.DeleteFunc(p.Syscalls, func(s *seccomp.Syscall) bool {
		s.Names = slices.DeleteFunc(s.Names, func(n string) bool { return n == "ioctl" })
		return len(s.Names) == 0 && s.Name == ""
	})
	for _, c := range ioctlCover(refusedIoctls) {
		p.Syscalls = append(p.Syscalls, &seccomp.Syscall{LinuxSyscall: specs.LinuxSyscall{
			Names:  []string{"ioctl"},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: 1, Value: uint64(c.mask), ValueTwo: uint64(c.value), Op: specs.OpMaskedEqual}},
		}})
	}
	return p
}

// maskedValue matches the requests r with r&mask == value.
type maskedValue struct{ mask, value uint32 }

// ioctlCover is a set of masked comparisons whose union is every 32-bit value
// but the refused ones: a binary trie of the refused values, each branch off
// it one comparison (39 for the four btrfs requests).
func ioctlCover(refused []uint32) []maskedValue {
	var out []maskedValue
	var walk func(mask, value uint32, bit int, set []uint32)
	walk = func(mask, value uint32, bit int, set []uint32) {
		if len(set) == 0 {
			out = append(out, maskedValue{mask, value})
			return
		}
		if bit < 0 {
			return // a refused value itself
		}
		b := uint32(1) << bit
		var zero, one []uint32
		for _, v := range set {
			if v&b == 0 {
				zero = append(zero, v)
			} else {
				one = append(one, v)
			}
		}
		walk(mask|b, value, bit-1, zero)
		walk(mask|b, value|b, bit-1, one)
	}
	walk(0, 0, 31, slices.Compact(slices.Sorted(slices.Values(refused))))
	return out
}

// ContainerCreate swaps the tenant profile's marker for the inline profile.
func (c *composeAPI) ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig,
	networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error) {
	if hostConfig != nil {
		hc := *hostConfig
		hc.SecurityOpt = slices.Clone(hostConfig.SecurityOpt)
		for i, opt := range hc.SecurityOpt {
			if !strings.HasPrefix(opt, seccompMarkerKey+"=") {
				continue
			}
			if opt != tenantSeccomp().marker {
				return container.CreateResponse{}, fmt.Errorf("create %s: security option %q names another tenant seccomp profile", containerName, opt)
			}
			hc.SecurityOpt[i] = "seccomp=" + tenantSeccomp().json
		}
		hostConfig = &hc
	}
	return c.APIClient.ContainerCreate(ctx, config, hostConfig, networkingConfig, platform, containerName)
}

// SeccompEnabled reports whether the daemon applies seccomp profiles (its
// security options list name=seccomp): without it no tenant container gets
// the tenant profile, and a btrfs volume's quota can be escaped. berthd
// refuses to run in production without it and warns otherwise.
func (e *Engine) SeccompEnabled(ctx context.Context) (bool, error) {
	info, err := e.info(ctx)
	if err != nil {
		return false, err
	}
	for _, opt := range info.SecurityOptions {
		if slices.Contains(strings.Split(opt, ","), "name=seccomp") {
			return true, nil
		}
	}
	return false, nil
}
