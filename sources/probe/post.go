package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/opctl-dev/opctl/sources"
)

// Post sends body (JSON) to rawURL with the given extra headers (e.g.
// Idempotency-Key) and reads the answer, within the Client's Timeout or the
// context's deadline. It never returns an error: a failure is a PostResult
// with Answered false (the request may have taken effect) or a non-2xx
// Status, and a Detail. Credentials in the URL never appear in the result.
func (c *Client) Post(ctx context.Context, rawURL string, body []byte, headers map[string]string) sources.PostResult {
	res := sources.PostResult{URL: sources.RedactURL(rawURL)}
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
