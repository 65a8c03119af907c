package engine

import "sync"

// boundedCache is a map safe for concurrent use that starts over when it
// holds max entries: what it holds is a look-up answer (by image ID, which
// names immutable content), so a miss only costs the look-up again.
type boundedCache[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func (c *boundedCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *boundedCache[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]V)
	}
	c.m[key] = v
}
