package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	resp, _, cancel, detail := c.do(ctx, http.MethodPost, rawURL, body, headers)
	defer cancel()
	if detail != "" {
		res.Detail = detail
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
