package lease

import "testing"

func TestPreloaded_TakenOnce(t *testing.T) {
	var none *Preloaded
	if _, _, ok := none.take("x"); ok {
		t.Fatal("a nil set handed out a state")
	}
	p := NewPreloaded()
	st := NewState()
	p.Put("x", st, 7)
	got, seq, ok := p.take("x")
	if !ok || got != st || seq != 7 {
		t.Fatalf("take = %p, %d, %t; want the state put, 7, true", got, seq, ok)
	}
	// A restarted actor must replay its journal, never reuse the state its
	// predecessor changed.
	if _, _, ok := p.take("x"); ok || p.Len() != 0 {
		t.Fatalf("second take = %t (len %d), want nothing", ok, p.Len())
	}
}
