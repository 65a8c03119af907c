package dockerio

import (
	"strings"
	"sync"

	"github.com/distribution/reference"
)

// ImageHolds are the images the admissions in flight of this process use, and
// the image collector's exclusion against them. A lease's worker holds every
// image it may admit (by repository and by recorded ID) before it resolves,
// pulls or inspects one, and lets go when its launch ended — by then the image
// is in its journaled release and its containers use it. The collector removes
// an image only through Remove, which refuses one held now or since its pass
// began (Mark): a pin the pass's snapshot missed was held meanwhile. A hold
// waits while a removal of one of its keys is under way, so an admission never
// finds an image that is about to vanish; after the removal it pulls again.
// The zero value is unusable; a nil *ImageHolds holds nothing.
type ImageHolds struct {
	mu       sync.Mutex
	cond     *sync.Cond
	seq      uint64
	held     map[string]int    // key → holders now
	touched  map[string]uint64 // key → seq of its latest hold, kept while a mark may need it
	removing map[string]bool   // keys of the removals under way
	marks    map[uint64]int    // marks not done yet
}

// NewImageHolds returns empty holds.
func NewImageHolds() *ImageHolds {
	h := &ImageHolds{held: map[string]int{}, touched: map[string]uint64{}, removing: map[string]bool{}, marks: map[uint64]int{}}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// ImageKeys are the hold keys of image references and IDs: an ID as is, a
// reference (tagged or by digest) as its normalized repository, so a tag held
// before it is resolved protects whatever content it resolves to.
func ImageKeys(refs ...string) []string {
	var out []string
	for _, r := range refs {
		if k := imageKey(r); k != "" {
			out = append(out, k)
		}
	}
	return out
}

func imageKey(ref string) string {
	if ref == "" {
		return ""
	}
	if strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return named.Name()
}

// Hold holds keys until release is called (once). It waits while a removal of
// any of them is under way.
func (h *ImageHolds) Hold(keys []string) (release func()) {
	if h == nil || len(keys) == 0 {
		return func() {}
	}
	h.mu.Lock()
	for h.anyRemoving(keys) {
		h.cond.Wait()
	}
	for _, k := range keys {
		h.held[k]++
		h.touched[k] = h.seq
	}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, k := range keys {
				if h.held[k]--; h.held[k] <= 0 {
					delete(h.held, k)
				}
				h.touched[k] = h.seq
			}
		})
	}
}

// Mark begins a collection: Remove with this mark refuses a key held at any
// moment after this call, even one released since. done ends the mark.
func (h *ImageHolds) Mark() (mark uint64, done func()) {
	if h == nil {
		return 0, func() {}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	mark = h.seq
	h.marks[mark]++
	var once sync.Once
	return mark, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.marks[mark]--; h.marks[mark] <= 0 {
				delete(h.marks, mark)
			}
			h.prune()
		})
	}
}

// prune forgets when keys nobody holds were last held, once no mark that
// could refuse them is open.
func (h *ImageHolds) prune() {
	oldest := h.seq + 1
	for m := range h.marks {
		oldest = min(oldest, m)
	}
	for k, at := range h.touched {
		if at < oldest && h.held[k] == 0 {
			delete(h.touched, k)
		}
	}
}

// Remove runs remove unless a key is held now or was since mark; meanwhile
// holds of those keys wait. It reports whether remove ran.
func (h *ImageHolds) Remove(mark uint64, keys []string, remove func() error) (bool, error) {
	if h == nil {
		return true, remove()
	}
	h.mu.Lock()
	for {
		for _, k := range keys {
			if at, ok := h.touched[k]; h.held[k] > 0 || (ok && at >= mark) {
				h.mu.Unlock()
				return false, nil
			}
		}
		if !h.anyRemoving(keys) {
			break
		}
		h.cond.Wait()
	}
	for _, k := range keys {
		h.removing[k] = true
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		for _, k := range keys {
			delete(h.removing, k)
		}
		h.cond.Broadcast()
		h.mu.Unlock()
	}()
	return true, remove()
}

// Held is how many keys are held now.
func (h *ImageHolds) Held() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

func (h *ImageHolds) anyRemoving(keys []string) bool {
	for _, k := range keys {
		if h.removing[k] {
			return true
		}
	}
	return false
}
