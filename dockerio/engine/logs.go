package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/berth-dev/berth/dockerio"
)

// MaxLogBytes is the hard cap on what one Logs call returns (the whole GET /logs
// body is bounded by 16 MiB; no single container may exceed it).
const MaxLogBytes = 16 << 20

// defaultLogTail is used when the caller passes no positive tail (CONTRACT: 100).
const defaultLogTail = 100

// Logs returns the last tail lines of one of this installation's containers'
// (adopted ones included) stdout and stderr, interleaved as Docker recorded them,
// keeping at most maxBytes (capped at MaxLogBytes) of the tail end. truncated reports that older output was cut; a
// cut lands on a line boundary when there is one, else on a rune boundary.
// Memory stays bounded by about twice maxBytes however long the lines are.
func (e *Engine) Logs(ctx context.Context, id string, tail int, maxBytes int) (string, bool, error) {
	if maxBytes <= 0 || maxBytes > MaxLogBytes {
		maxBytes = MaxLogBytes
	}
	if tail <= 0 {
		tail = defaultLogTail
	}
	info, err := e.docker.ContainerInspect(ctx, id)
	if err != nil {
		return "", false, dockerErr("logs of "+trimID(id), err)
	}
	// Another installation's tenant output is not ours to read.
	if info.Config == nil || !e.ownsContainer(info.ID, info.Config.Labels) {
		return "", false, fmt.Errorf("logs of %s: %w", trimID(id), dockerio.ErrForeignObject)
	}
	rc, err := e.docker.ContainerLogs(ctx, info.ID, container.LogsOptions{
		ShowStdout: true,
		ShowStderr: true,
		Tail:       strconv.Itoa(tail),
	})
	if err != nil {
		return "", false, dockerErr("logs of "+trimID(id), err)
	}
	defer rc.Close()
	buf := newTailBuffer(maxBytes)
	if info.Config != nil && info.Config.Tty {
		_, err = io.Copy(buf, rc) // a TTY stream is raw, not multiplexed
	} else {
		_, err = stdcopy.StdCopy(buf, buf, rc)
	}
	if err != nil {
		return "", false, dockerErr(fmt.Sprintf("read logs of %s", trimID(id)), err)
	}
	text, truncated := buf.result()
	return text, truncated, nil
}

// tailBuffer is an io.Writer that keeps only the last max bytes written.
type tailBuffer struct {
	max   int
	buf   []byte
	total int64
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	t.total += int64(n)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		kept := copy(t.buf, t.buf[len(t.buf)-t.max:])
		t.buf = t.buf[:kept]
	}
	return n, nil
}

// result returns the kept tail and whether anything was cut.
func (t *tailBuffer) result() (string, bool) {
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	if t.total <= int64(t.max) {
		return string(b), false
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
		b = b[i+1:] // drop the partial first line
	} else {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
	}
	return string(b), true
}
