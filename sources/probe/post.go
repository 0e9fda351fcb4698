package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// PostResult is a downstream's answer to a POST (a compensation call).
type PostResult struct {
	// Status is the HTTP status code; 0 when no answer was received.
	Status int
	// Body is the start of the answer (at most MaxBody bytes).
	Body string
	// URL is the URL posted to, without userinfo.
	URL string
	// Answered is false when the request may or may not have reached the
	// service (a timeout, a reset connection): its effect is unknown.
	Answered bool
	// Detail says what happened, without credentials.
	Detail string
}

// OK reports whether the service answered 2xx.
func (r PostResult) OK() bool { return r.Answered && r.Status >= 200 && r.Status <= 299 }

// Post sends body (JSON) to rawURL with the given extra headers (e.g.
// Idempotency-Key) and reads the answer, within the Client's Timeout or the
// context's deadline. It never returns an error: a failure is a PostResult
// with Answered false (the request may have taken effect) or a non-2xx
// Status, and a Detail. Credentials in the URL never appear in the result.
func (c *Client) Post(ctx context.Context, rawURL string, body []byte, headers map[string]string) PostResult {
	res := PostResult{URL: Redact(rawURL)}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		res.Detail = "invalid URL (want http:// or https://)"
		return res
	}
	budget := c.Timeout
	if dl, ok := ctx.Deadline(); ok && (budget <= 0 || time.Until(dl) < budget) {
		budget = time.Until(dl).Round(time.Millisecond)
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		res.Detail = "invalid URL"
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		res.Detail = describe(err, budget)
		return res
	}
	defer resp.Body.Close()
	res.Answered = true
	res.Status = resp.StatusCode
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	res.Body = string(b)
	res.Detail = fmt.Sprintf("HTTP %d", resp.StatusCode)
	return res
}
