// Package probe asks downstream services over HTTP whether a call took
// effect. It implements sources.Prober with the convention of docs/config.md and docs/where.md:
//
//   - the probe is a GET of the configured URL (request_id or biz_id filled in
//     by the caller);
//   - HTTP 404 means absent;
//   - a 2xx JSON object with a numeric "count" (a probe keyed by {biz_id})
//     reports how many effects the downstream holds: applied when > 0,
//     absent when 0;
//   - otherwise a 2xx JSON object's "status" is applied when it is one of the
//     step's probe_applied values, absent when one of probe_absent, and
//     inconclusive for any other value;
//   - any other status code, a body that is not a JSON object, a refused
//     connection or no answer within the timeout is inconclusive, with a
//     Detail saying which.
//
// Credentials in the URL's userinfo are sent (as basic auth, as net/http
// does) but never appear in a result's URL or Detail.
package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// MaxBody is the most of a probe answer that is read: a status answer is a
// few dozen bytes; a larger body is inconclusive.
const MaxBody = 64 << 10

// Client probes downstream services. The zero value is usable (it uses
// http.DefaultClient and no timeout of its own beyond the caller's context).
type Client struct {
	// HTTP is the client used for the GETs; nil means http.DefaultClient.
	HTTP *http.Client
	// Timeout bounds each probe, body read included; 0 means only the
	// caller's context bounds it.
	Timeout time.Duration
}

// New returns a Client whose probes each give up after timeout.
func New(timeout time.Duration) *Client {
	return &Client{
		HTTP:    &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Timeout: timeout,
	}
}

var _ sources.Prober = (*Client)(nil)

// Probe GETs rawURL and classifies the answer with the step's applied and
// absent status values (compared exactly). It never returns an error: every
// failure is an inconclusive result with a Detail. It returns within the
// Client's Timeout (or the context's deadline, whichever is first).
func (c *Client) Probe(ctx context.Context, rawURL string, applied, absent []string) sources.ProbeResult {
	res := sources.ProbeResult{Outcome: sources.ProbeInconclusive, URL: sources.RedactURL(rawURL)}
	resp, budget, cancel, detail := c.do(ctx, http.MethodGet, rawURL, nil, nil)
	defer cancel()
	if detail != "" {
		res.Detail = strings.Replace(detail, "invalid URL", "invalid probe URL", 1)
		return res
	}
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusNotFound {
		res.Outcome = sources.ProbeAbsent
		res.Detail = "HTTP 404"
		return res
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		res.Detail = fmt.Sprintf("HTTP %d", resp.StatusCode)
		return res
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		res.Detail = fmt.Sprintf("HTTP %d, reading the body: %s", resp.StatusCode, describe(err, budget))
		return res
	}
	if len(body) > MaxBody {
		res.Detail = fmt.Sprintf("HTTP %d with a body over %d KiB", resp.StatusCode, MaxBody>>10)
		return res
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		res.Detail = fmt.Sprintf("HTTP %d with a body that is not a JSON object", resp.StatusCode)
		return res
	}
	rawStatus, hasStatus := obj["status"]
	statusIsString := hasStatus && json.Unmarshal(rawStatus, &res.Status) == nil

	if raw, ok := obj["count"]; ok && string(raw) != "null" {
		n, ok := count(raw)
		if !ok {
			res.Detail = fmt.Sprintf("HTTP %d: \"count\" is %s, not a non-negative integer", resp.StatusCode, clip(string(raw)))
			return res
		}
		res.Count = &n
		if n > 0 {
			res.Outcome = sources.ProbeApplied
		} else {
			res.Outcome = sources.ProbeAbsent
		}
		return res
	}

	switch {
	case !hasStatus:
		res.Detail = fmt.Sprintf("HTTP %d: no \"status\" or \"count\" field", resp.StatusCode)
	case !statusIsString:
		res.Detail = fmt.Sprintf("HTTP %d: \"status\" is %s, not a string", resp.StatusCode, clip(string(rawStatus)))
	case slices.Contains(applied, res.Status):
		res.Outcome = sources.ProbeApplied
	case slices.Contains(absent, res.Status):
		res.Outcome = sources.ProbeAbsent
	default:
		res.Detail = fmt.Sprintf("status %q is neither applied %v nor absent %v", clip(res.Status), applied, absent)
	}
	return res
}

// count reads a JSON number that is a non-negative integer.
func count(raw json.RawMessage) (int, bool) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, false
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// describe says why a request got no answer, without the URL (whose
// userinfo net/http would only partly redact). budget is the time the probe
// had (0: unbounded).
func describe(err error, budget time.Duration) string {
	var netErr net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		if budget > 0 {
			return "timeout after " + budget.String()
		}
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dnsErr):
		return "cannot resolve host " + dnsErr.Name
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return clip(err.Error())
}

// clip shortens a value quoted in a Detail.
func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// do sends one request within the client's timeout and the caller's
// deadline. detail is set (and resp nil) when the URL is not http(s) or the
// request got no answer; budget is the time the request was allowed, for
// messages. The caller must call cancel after reading the body.
func (c *Client) do(ctx context.Context, method, rawURL string, body []byte, headers map[string]string) (resp *http.Response, budget time.Duration, cancel context.CancelFunc, detail string) {
	cancel = func() {}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, 0, cancel, "invalid URL (want http:// or https://)"
	}
	budget = c.Timeout
	if dl, ok := ctx.Deadline(); ok && (budget <= 0 || time.Until(dl) < budget) {
		budget = time.Until(dl).Round(time.Millisecond)
	}
	if c.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, budget, cancel, "invalid URL"
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err = hc.Do(req)
	if err != nil {
		return nil, budget, cancel, describe(err, budget)
	}
	return resp, budget, cancel, ""
}
