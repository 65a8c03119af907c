package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berth-dev/berth/messages"
)

// follow polls GET /provisions/{lease} and prints each state the lease moves
// through, until it is ready (nil) or failed (an error carrying its reason), or
// the timeout passes. Restarting/updating count as "on the way": a restore reads
// "restarting" until its data is back and the lease is ready.
func (c *client) follow(lease string, timeout, every time.Duration) error {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	last := ""
	for {
		status, data, err := c.call(http.MethodGet, "/provisions/"+lease, nil)
		if err == nil && strings.HasPrefix(status, "200") {
			var info messages.ProvisionInfo
			if err := json.Unmarshal(data, &info); err != nil {
				return fmt.Errorf("GET /provisions/%s: %w", lease, err)
			}
			if info.Status != last {
				fmt.Fprintf(c.out, "%6.1fs  %s\n", time.Since(start).Seconds(), info.Status)
				last = info.Status
			}
			switch info.Status {
			case messages.StatusReady:
				return nil
			case messages.StatusFailed:
				return fmt.Errorf("lease %s failed: %s", lease, failure(info))
			}
		} else if err == nil && !strings.HasPrefix(status, "404") {
			return fmt.Errorf("GET /provisions/%s: %s %s", lease, status, strings.TrimSpace(string(data)))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lease %s is still %q after %s", lease, last, timeout)
		}
		time.Sleep(every)
	}
}

// failure is "reason: message", either alone, or "no reason given".
func failure(info messages.ProvisionInfo) string {
	if info.Reason != "" && info.Message != "" {
		return info.Reason + ": " + info.Message
	}
	return cmp.Or(info.Reason, info.Message, "no reason given")
}
