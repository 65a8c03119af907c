package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
)

// Delivery sends one outbox row: attempts after the configured delays inside one
// overall deadline, each attempt freshly signed. It reports whether a 2xx arrived.
type Delivery struct {
	Client   *http.Client
	Secret   []byte
	Delays   []time.Duration // before each attempt: 0 s, 1 s, 5 s
	Deadline time.Duration   // 2 m 15 s across all attempts
	Now      func() time.Time
	Observe  func(outcome string)
	// Attempted, when set, is told after every attempt: its number within this
	// Send, when it ended, and its error (nil: delivered).
	Attempted func(n int, at time.Time, err error)
}

// Attempt outcomes, for berth_callback_attempts_total{outcome}.
const (
	OutcomeDelivered = "delivered"
	OutcomeRejected  = "rejected"  // non-2xx status
	OutcomeTransport = "transport" // no response
	OutcomeRefused   = "refused"   // the callback policy refused the address dialled
	OutcomeCanceled  = "canceled"
)

// Send delivers row. It returns nil on a 2xx, otherwise the last attempt's error.
func (d *Delivery) Send(ctx context.Context, row persistence.OutboxRow) error {
	ctx, cancel := context.WithTimeout(ctx, d.Deadline)
	defer cancel()
	var last error
	for i, delay := range d.Delays {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				d.observe(OutcomeCanceled)
				return fmt.Errorf("deliver %s after %d attempts: %w (last: %v)", row.DeliveryID, i, ctx.Err(), last)
			case <-t.C:
			}
		}
		last = d.attempt(ctx, row)
		if d.Attempted != nil {
			d.Attempted(i+1, d.Now(), last)
		}
		if last == nil {
			return nil
		}
		if ctx.Err() != nil { // the attempt was cut off; it is already counted
			return fmt.Errorf("deliver %s after %d attempts: %w (last: %v)", row.DeliveryID, i+1, ctx.Err(), last)
		}
	}
	return fmt.Errorf("deliver %s: %d attempts failed: %w", row.DeliveryID, len(d.Delays), last)
}

func (d *Delivery) attempt(ctx context.Context, row persistence.OutboxRow) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, row.URL, bytes.NewReader(row.Body))
	if err != nil {
		d.observe(OutcomeTransport)
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Berth-Delivery-Id", row.DeliveryID)
	if err := callback.SignRequest(d.Secret, req, row.Body, d.Now()); err != nil {
		d.observe(OutcomeTransport)
		return fmt.Errorf("sign: %w", err)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			d.observe(OutcomeCanceled)
		case errors.Is(err, callback.ErrRefusedDial):
			d.observe(OutcomeRefused)
		default:
			d.observe(OutcomeTransport)
		}
		return fmt.Errorf("post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		d.observe(OutcomeRejected)
		return fmt.Errorf("post: status %d", resp.StatusCode)
	}
	d.observe(OutcomeDelivered)
	return nil
}

func (d *Delivery) observe(outcome string) {
	if d.Observe != nil {
		d.Observe(outcome)
	}
}
