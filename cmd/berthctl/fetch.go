package main

// Reading the daemon: a signed GET of the API, or a GET of the debug listener
// with its bearer token; any answer but a 2xx is an answerError.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// answerError is a non-2xx answer. berthctl prints it (the error text carries
// the body) and exits 1.
type answerError struct {
	method, uri, status string
	body                []byte
}

func (e *answerError) Error() string {
	body := strings.TrimSpace(string(e.body))
	if len(body) > 4096 {
		body = body[:4096] + "…"
	}
	if body == "" {
		return fmt.Sprintf("%s %s: %s", e.method, e.uri, e.status)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.method, e.uri, e.status, body)
}

// success reports whether an HTTP status line ("200 OK") is a 2xx.
func success(status string) bool { return strings.HasPrefix(status, "2") }

// getAPI sends a signed GET to the API and returns the body of a 2xx answer.
func (c *client) getAPI(uri string) ([]byte, error) {
	status, body, err := c.call(http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", uri, err)
	}
	if !success(status) {
		return nil, &answerError{method: http.MethodGet, uri: uri, status: status, body: body}
	}
	return body, nil
}

// debugRequest is a request to the debug listener, with the bearer token when
// one is configured.
func (c *client) debugRequest(ctx context.Context, uri string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.debug+uri, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", uri, err)
	}
	if c.debugToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.debugToken)
	}
	return req, nil
}

// getDebug reads the debug listener and returns the body of a 2xx answer.
func (c *client) getDebug(uri string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := c.debugRequest(ctx, uri)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", uri, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read response: %w", uri, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &answerError{method: http.MethodGet, uri: uri, status: resp.Status, body: body}
	}
	return body, nil
}

// getAPIJSON is getAPI decoding the answer into into.
func (c *client) getAPIJSON(uri string, into any) error {
	body, err := c.getAPI(uri)
	if err != nil {
		return err
	}
	return decode(uri, body, into)
}

// showDebug prints the debug read model at uri: with -o json the daemon's own
// bytes, else the table print makes of it decoded.
func showDebug[T any](c *client, uri string, asJSON bool, print func(T) error) error {
	body, err := c.getDebug(uri)
	if err != nil {
		return err
	}
	if asJSON {
		return writeRawJSON(c.out, body)
	}
	var page T
	if err := decode(uri, body, &page); err != nil {
		return err
	}
	return print(page)
}

// decode unmarshals an answer, naming what it was when it does not fit.
func decode(uri string, body []byte, into any) error {
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: unexpected answer: %w", uri, err)
	}
	return nil
}
