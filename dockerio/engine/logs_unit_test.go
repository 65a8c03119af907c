package engine

import (
	"strings"
	"testing"
)

func TestTailBuffer_KeepsLastBytes_CutsOnLineBoundary(t *testing.T) {
	var lines []string
	for i := range 1000 {
		lines = append(lines, "line "+strings.Repeat("x", i%37))
	}
	full := strings.Join(lines, "\n") + "\n"
	for _, max := range []int{1, 10, 100, 4096, len(full) - 1, len(full), len(full) + 1} {
		b := newTailBuffer(max)
		for chunk := full; chunk != ""; {
			n := min(len(chunk), 1+len(chunk)%53) // uneven writes, some larger than max
			b.Write([]byte(chunk[:n]))
			chunk = chunk[n:]
		}
		got, truncated := b.result()
		if len(got) > max {
			t.Errorf("max %d: kept %d bytes", max, len(got))
		}
		if truncated != (len(full) > max) {
			t.Errorf("max %d: truncated = %v", max, truncated)
		}
		if !strings.HasSuffix(full, got) {
			t.Errorf("max %d: result is not the tail of the input", max)
		}
		if truncated && max > 100 && (!strings.HasPrefix(got, "line ") || len(got) < max-40) {
			t.Errorf("max %d: cut not on a line boundary or too much dropped: %.20q (%d bytes)", max, got, len(got))
		}
	}
}

func TestTailBuffer_CutNeverSplitsARune(t *testing.T) {
	b := newTailBuffer(7)
	b.Write([]byte(strings.Repeat("é", 20))) // 2-byte runes, no newline
	got, truncated := b.result()
	if !truncated || got != strings.Repeat("é", 3) {
		t.Errorf("got %q (truncated %v), want three whole runes", got, truncated)
	}
}
