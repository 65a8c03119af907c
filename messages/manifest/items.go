package manifest

import (
	"regexp"
	"slices"

	"github.com/berth-dev/berth/messages"
)

const (
	// DefaultService names the single service of a flat manifest and of a lone
	// lease item without service_name.
	DefaultService = "app"
	// MaxQuantity bounds each item's quantity and the lease's total.
	MaxQuantity = 1024
	// MaxItems bounds the number of items (services) of a lease. Items of quantity 0
	// are legal, so the quantity bound alone would not bound it.
	MaxItems = 1024
	// maxServiceNameLen is the DNS-label bound the name regex is checked against.
	maxServiceNameLen = 63
)

var serviceNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// validServiceName reports whether s is a legal service name.
func validServiceName(s string) bool {
	return len(s) <= maxServiceNameLen && serviceNameRE.MatchString(s)
}

// NormalizeItems applies the item rules of CONTRACT.md and returns a normalised
// copy (a lone item without service_name becomes "app"); items is not modified.
// Refusals are ErrBadRequest.
func NormalizeItems(items []messages.LeaseItem) ([]messages.LeaseItem, error) {
	if len(items) == 0 {
		return nil, badRequest("items must not be empty")
	}
	if len(items) > MaxItems {
		return nil, badRequest("items: at most %d items are allowed", MaxItems)
	}
	out := slices.Clone(items)
	named := 0
	for _, it := range out {
		if it.ServiceName != "" {
			named++
		}
	}
	switch {
	case named == 0 && len(out) == 1:
		out[0].ServiceName = DefaultService
	case named == 0:
		return nil, badRequest("items: service_name is required when a lease has more than one item")
	case named != len(out):
		return nil, badRequest("items: named and unnamed items cannot be mixed; every item needs a service_name")
	}
	total := 0
	seen := make(map[string]struct{}, len(out))
	for i, it := range out {
		if it.Quantity < 0 || it.Quantity > MaxQuantity {
			return nil, badRequest("items[%d]: quantity must be between 0 and %d", i, MaxQuantity)
		}
		total += it.Quantity
		if !validServiceName(it.ServiceName) {
			return nil, badRequest("items[%d]: service_name %s must match ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ and be at most %d characters",
				i, excerpt(it.ServiceName), maxServiceNameLen)
		}
		if _, dup := seen[it.ServiceName]; dup {
			return nil, badRequest("items[%d]: service_name %q appears more than once", i, it.ServiceName)
		}
		seen[it.ServiceName] = struct{}{}
	}
	if total > MaxQuantity {
		return nil, badRequest("items: total quantity must be at most %d", MaxQuantity)
	}
	return out, nil
}
