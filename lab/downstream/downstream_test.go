package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// start starts a service that the test closes at its end.
func start(t *testing.T, name string) *Service {
	t.Helper()
	s, err := Start(name)
	if err != nil {
		t.Fatalf("Start(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close %s: %v", name, err)
		}
	})
	return s
}

// client returns an HTTP client with its own transport, closed at test end.
func client(t *testing.T, timeout time.Duration) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: false}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

type answer struct {
	Code     int
	Status   string `json:"status"`
	EffectID int64  `json:"effect_id"`
	Count    *int   `json:"count"`
	Error    string `json:"error"`
	Raw      string
}

func do(t *testing.T, c *http.Client, req *http.Request) (answer, error) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{Code: resp.StatusCode, Raw: string(b)}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", req.Method, req.URL, ct)
	}
	if strings.HasPrefix(strings.TrimSpace(a.Raw), "{") {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s %s: answer %q is not JSON: %v", req.Method, req.URL, b, err)
		}
	}
	return a, nil
}

func callReq(t *testing.T, ctx context.Context, s *Service, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

func callBody(reqID, bizID string) string {
	b, _ := json.Marshal(map[string]any{"request_id": reqID, "biz_id": bizID, "payload": map[string]any{"qty": 2}})
	return string(b)
}

func mustDo(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	a, err := do(t, c, req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	return a
}

func call(t *testing.T, c *http.Client, s *Service, reqID, bizID string) answer {
	t.Helper()
	return mustDo(t, c, callReq(t, context.Background(), s, callBody(reqID, bizID)))
}

func get(t *testing.T, c *http.Client, s *Service, path string, q url.Values) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return mustDo(t, c, req)
}

func post(t *testing.T, c *http.Client, s *Service, path string, q url.Values) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return mustDo(t, c, req)
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func want(t *testing.T, what string, a answer, code int, status string) {
	t.Helper()
	if a.Code != code || a.Status != status {
		t.Fatalf("%s: got %d %q (%s), want %d %q", what, a.Code, a.Status, strings.TrimSpace(a.Raw), code, status)
	}
}

func TestStartURLAndName(t *testing.T) {
	s := start(t, "wms")
	if s.Name != "wms" {
		t.Errorf("Name = %q", s.Name)
	}
	u, err := url.Parse(s.URL)
	if err != nil || u.Scheme != "http" || u.Path != "" {
		t.Fatalf("URL = %q (%v), want http://127.0.0.1:PORT", s.URL, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("URL host %q: want 127.0.0.1 with a real port", u.Host)
	}
	if _, err := Start(""); err == nil {
		t.Error("Start(\"\") succeeded, want an error")
	}
}

func TestCallIsNotIdempotent(t *testing.T) {
	s := start(t, "wms")
	c := client(t, 10*time.Second)

	a := call(t, c, s, "F-1:wms", "F-1")
	want(t, "first call", a, 200, "APPLIED")
	if a.EffectID != 1 {
		t.Errorf("first effect_id = %d, want 1", a.EffectID)
	}
	// The same request id again is a second effect: no idempotency.
	a = call(t, c, s, "F-1:wms", "F-1")
	want(t, "same request id again", a, 200, "APPLIED")
	if a.EffectID != 2 {
		t.Errorf("second effect_id = %d, want 2", a.EffectID)
	}
	// A new request id for the same operation (seed 001's new owner).
	a = call(t, c, s, "F-1:wms:retry", "F-1")
	want(t, "new request id", a, 200, "APPLIED")
	call(t, c, s, "F-2:wms", "F-2")

	if n := s.Net("F-1"); n != 3 {
		t.Errorf("Net(F-1) = %d, want 3", n)
	}
	if n := s.Net("F-2"); n != 1 {
		t.Errorf("Net(F-2) = %d, want 1", n)
	}
	if n := s.Net("nope"); n != 0 {
		t.Errorf("Net(nope) = %d, want 0", n)
	}
	if n := s.TotalCalls(); n != 4 {
		t.Errorf("TotalCalls = %d, want 4", n)
	}
	calls := s.Calls("F-1")
	if len(calls) != 3 {
		t.Fatalf("Calls(F-1) = %d entries, want 3", len(calls))
	}
	for i, wantReq := range []string{"F-1:wms", "F-1:wms", "F-1:wms:retry"} {
		got := calls[i]
		if got.RequestID != wantReq || got.BizID != "F-1" || got.EffectID != int64(i+1) || got.At.IsZero() || got.Compensated {
			t.Errorf("Calls(F-1)[%d] = %+v, want request %q effect %d", i, got, wantReq, i+1)
		}
		if string(got.Payload) != `{"qty":2}` {
			t.Errorf("Calls(F-1)[%d].Payload = %s", i, got.Payload)
		}
	}
	if calls := s.Calls("nope"); len(calls) != 0 {
		t.Errorf("Calls(nope) = %v, want none", calls)
	}

	a = get(t, c, s, "/effects", q("biz_id", "F-1"))
	if a.Code != 200 || a.Count == nil || *a.Count != 3 {
		t.Errorf("/effects F-1: %d %s, want 200 count 3", a.Code, a.Raw)
	}
	a = get(t, c, s, "/effects", q("biz_id", "nope"))
	if a.Code != 200 || a.Count == nil || *a.Count != 0 {
		t.Errorf("/effects nope: %d %s, want 200 count 0", a.Code, a.Raw)
	}
}

func TestCallRejectsBadRequests(t *testing.T) {
	s := start(t, "notify")
	c := client(t, 10*time.Second)
	for _, tc := range []struct {
		name, body string
	}{
		{"no request_id", `{"biz_id":"PAY-1"}`},
		{"empty request_id", `{"request_id":"","biz_id":"PAY-1"}`},
		{"no biz_id", `{"request_id":"r-1"}`},
		{"empty biz_id", `{"request_id":"r-1","biz_id":""}`},
		{"not JSON", `request_id=r-1&biz_id=PAY-1`},
		{"JSON array", `["r-1","PAY-1"]`},
		{"empty body", ``},
	} {
		a := mustDo(t, c, callReq(t, context.Background(), s, tc.body))
		want(t, tc.name, a, 400, "BAD_REQUEST")
		if a.Error == "" {
			t.Errorf("%s: 400 without an error text", tc.name)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/call", nil)
	a := mustDo(t, c, req)
	want(t, "GET /call", a, 405, "METHOD_NOT_ALLOWED")
	if n := s.TotalCalls(); n != 0 {
		t.Errorf("TotalCalls after rejected calls = %d, want 0", n)
	}
	a = get(t, c, s, "/status", q("request_id", "r-1"))
	want(t, "status of a rejected call", a, 404, "NOT_FOUND")
}

func TestStatusAndCompensateByRequestID(t *testing.T) {
	s := start(t, "notify")
	c := client(t, 10*time.Second)

	want(t, "status never applied", get(t, c, s, "/status", q("request_id", "PAY-1:notify")), 404, "NOT_FOUND")
	want(t, "status without request_id", get(t, c, s, "/status", nil), 400, "BAD_REQUEST")
	want(t, "compensate never applied", post(t, c, s, "/compensate", q("request_id", "PAY-1:notify")), 404, "NOT_FOUND")

	call(t, c, s, "PAY-1:notify", "PAY-1")
	call(t, c, s, "PAY-1:notify", "PAY-1") // replayed: two effects, one request id
	want(t, "status applied", get(t, c, s, "/status", q("request_id", "PAY-1:notify")), 200, "APPLIED")

	a := post(t, c, s, "/compensate", q("request_id", "PAY-1:notify"))
	want(t, "compensate 1", a, 200, "COMPENSATED")
	if a.EffectID != 2 {
		t.Errorf("compensate 1 reversed effect %d, want the newest (2)", a.EffectID)
	}
	if n := s.Net("PAY-1"); n != 1 {
		t.Errorf("Net after one compensation = %d, want 1", n)
	}
	// One effect of the request is still live.
	want(t, "status half compensated", get(t, c, s, "/status", q("request_id", "PAY-1:notify")), 200, "APPLIED")

	a = post(t, c, s, "/compensate", q("request_id", "PAY-1:notify"))
	want(t, "compensate 2", a, 200, "COMPENSATED")
	if a.EffectID != 1 {
		t.Errorf("compensate 2 reversed effect %d, want 1", a.EffectID)
	}
	want(t, "status all compensated", get(t, c, s, "/status", q("request_id", "PAY-1:notify")), 200, "COMPENSATED")
	want(t, "compensate 3", post(t, c, s, "/compensate", q("request_id", "PAY-1:notify")), 404, "NOT_FOUND")

	if n := s.Net("PAY-1"); n != 0 {
		t.Errorf("Net after two compensations = %d, want 0", n)
	}
	calls := s.Calls("PAY-1")
	if len(calls) != 2 || !calls[0].Compensated || !calls[1].Compensated || calls[0].CompensatedAt.IsZero() {
		t.Errorf("Calls after compensation = %+v, want both listed and compensated", calls)
	}
	if n := s.TotalCalls(); n != 2 {
		t.Errorf("TotalCalls = %d, want 2 (compensation is not a call)", n)
	}
	a = get(t, c, s, "/effects", q("biz_id", "PAY-1"))
	if a.Count == nil || *a.Count != 0 {
		t.Errorf("/effects after compensation: %s, want count 0", a.Raw)
	}
}

func TestCompensateByBizID(t *testing.T) {
	s := start(t, "wms")
	c := client(t, 10*time.Second)

	call(t, c, s, "r-a", "F-1")
	call(t, c, s, "r-b", "F-2")
	call(t, c, s, "r-c", "F-1")

	a := post(t, c, s, "/compensate", q("biz_id", "F-1"))
	want(t, "compensate F-1", a, 200, "COMPENSATED")
	if a.EffectID != 3 {
		t.Errorf("compensated effect %d, want the newest live of F-1 (3)", a.EffectID)
	}
	if n := s.Net("F-1"); n != 1 {
		t.Errorf("Net(F-1) = %d, want 1", n)
	}
	if n := s.Net("F-2"); n != 1 {
		t.Errorf("Net(F-2) = %d, want 1 (untouched)", n)
	}
	want(t, "status r-c", get(t, c, s, "/status", q("request_id", "r-c")), 200, "COMPENSATED")
	want(t, "status r-a", get(t, c, s, "/status", q("request_id", "r-a")), 200, "APPLIED")

	a = post(t, c, s, "/compensate", q("biz_id", "F-1"))
	if a.EffectID != 1 {
		t.Errorf("second compensate of F-1 reversed %d, want 1", a.EffectID)
	}
	want(t, "third compensate of F-1", post(t, c, s, "/compensate", q("biz_id", "F-1")), 404, "NOT_FOUND")
	want(t, "compensate unknown biz", post(t, c, s, "/compensate", q("biz_id", "nope")), 404, "NOT_FOUND")
	want(t, "compensate without key", post(t, c, s, "/compensate", nil), 400, "BAD_REQUEST")
	// Both keys: the request's effect, only if it belongs to that biz id.
	want(t, "compensate r-b as F-1", post(t, c, s, "/compensate", q("request_id", "r-b", "biz_id", "F-1")), 404, "NOT_FOUND")
	want(t, "compensate r-b as F-2", post(t, c, s, "/compensate", q("request_id", "r-b", "biz_id", "F-2")), 200, "COMPENSATED")

	want(t, "GET /compensate", get(t, c, s, "/compensate", q("biz_id", "F-1")), 405, "METHOD_NOT_ALLOWED")
	want(t, "POST /status", post(t, c, s, "/status", q("request_id", "r-a")), 405, "METHOD_NOT_ALLOWED")
	want(t, "effects without biz_id", get(t, c, s, "/effects", nil), 400, "BAD_REQUEST")
}

func TestJournal(t *testing.T) {
	s := start(t, "logistics")
	c := client(t, 10*time.Second)

	a := get(t, c, s, "/journal", q("biz_id", "F-1"))
	if a.Code != 200 || strings.TrimSpace(a.Raw) != "[]" {
		t.Fatalf("empty journal: %d %q, want 200 []", a.Code, a.Raw)
	}
	call(t, c, s, "r-1", "F-1")
	call(t, c, s, "r-2", "F-2")
	post(t, c, s, "/compensate", q("request_id", "r-1"))

	var entries []Call
	if err := json.Unmarshal([]byte(get(t, c, s, "/journal", q("biz_id", "F-1")).Raw), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].RequestID != "r-1" || !entries[0].Compensated || entries[0].EffectID != 1 {
		t.Errorf("journal F-1 = %+v", entries)
	}
	if err := json.Unmarshal([]byte(get(t, c, s, "/journal", nil).Raw), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].BizID != "F-2" {
		t.Errorf("whole journal = %+v", entries)
	}
}

func TestFaultDelayAppliesButCallerTimesOut(t *testing.T) {
	s := start(t, "wms")
	// Seed 001: the WMS locks the stock, but answers after the
	// consumer's timeout.
	s.SetFault("F-1", Fault{Delay: time.Hour})
	// The caller's timeout only has to outlast the call reaching the
	// service (the effect is applied before the delay): a short one.
	impatient := client(t, 500*time.Millisecond)
	c := client(t, 10*time.Second)

	_, err := do(t, impatient, callReq(t, context.Background(), s, callBody("F-1:wms", "F-1")))
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("call with a Delay fault: err = %v, want a client timeout", err)
	}
	if n := s.Net("F-1"); n != 1 {
		t.Fatalf("Net(F-1) = %d after the timed-out call, want 1: the effect happened", n)
	}
	a := get(t, client(t, 10*time.Second), s, "/status", q("request_id", "F-1:wms"))
	want(t, "probe after timeout", a, 200, "APPLIED")

	// The new owner calls again with a new request id: double lock.
	s.ClearFaults()
	want(t, "retry by the new owner", call(t, c, s, "F-1:wms:2", "F-1"), 200, "APPLIED")
	a = get(t, c, s, "/effects", q("biz_id", "F-1"))
	if a.Count == nil || *a.Count != 2 {
		t.Errorf("/effects F-1 = %s, want count 2 (stock locked twice)", a.Raw)
	}
}

func TestFaultDelayAnswersAfterDelay(t *testing.T) {
	s := start(t, "notify")
	s.SetFault("PAY-1", Fault{Delay: 50 * time.Millisecond})
	a := call(t, client(t, 0), s, "PAY-1:notify", "PAY-1")
	want(t, "delayed call", a, 200, "APPLIED")
}

func TestFaultBlockHoldsAnswerUntilReleased(t *testing.T) {
	s := start(t, "wms")
	applied := make(chan Call, 1)
	s.OnCall(func(c Call) {
		// OnCall may use the service's API.
		if s.Net(c.BizID) < 1 {
			t.Errorf("OnCall before the effect was applied")
		}
		applied <- c
	})
	release := make(chan struct{})
	s.SetFault("F-1", Fault{Block: release})
	c := client(t, 0)

	res := make(chan answer, 1)
	go func() {
		a, err := do(t, c, callReq(t, context.Background(), s, callBody("F-1:wms", "F-1")))
		if err != nil {
			t.Errorf("blocked call: %v", err)
		}
		res <- a
	}()
	got := <-applied
	if got.RequestID != "F-1:wms" || got.EffectID != 1 {
		t.Errorf("OnCall got %+v", got)
	}
	if n := s.Net("F-1"); n != 1 {
		t.Errorf("Net while blocked = %d, want 1", n)
	}
	select {
	case a := <-res:
		t.Fatalf("answer %+v arrived while Block is open", a)
	default:
	}
	// Others are not blocked.
	want(t, "other biz id", call(t, client(t, 0), s, "F-2:wms", "F-2"), 200, "APPLIED")
	<-applied
	close(release)
	a := <-res
	want(t, "released call", a, 200, "APPLIED")
	if a.EffectID != 1 {
		t.Errorf("released call effect_id = %d, want 1", a.EffectID)
	}
}

func TestFaultBlockEndsWithCallerContext(t *testing.T) {
	s := start(t, "wms")
	applied := make(chan Call, 1)
	s.OnCall(func(c Call) { applied <- c })
	s.SetFault("F-1", Fault{Block: make(chan struct{})}) // never closed
	c := client(t, 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := do(t, c, callReq(t, ctx, s, callBody("F-1:wms", "F-1")))
		errc <- err
	}()
	<-applied
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: err = %v, want context.Canceled", err)
	}
	if n := s.Net("F-1"); n != 1 {
		t.Errorf("Net = %d, want 1", n)
	}
	// Close (in Cleanup) must not hang on the handler: it returned
	// when the caller went away, or Close releases it.
}

func TestFaultFailAppliesNothing(t *testing.T) {
	s := start(t, "points")
	hooks := 0
	var mu sync.Mutex
	s.OnCall(func(Call) { mu.Lock(); hooks++; mu.Unlock() })
	s.SetFault("8821", Fault{Fail: http.StatusServiceUnavailable})
	c := client(t, 10*time.Second)

	for i := range 3 {
		a := call(t, c, s, fmt.Sprintf("8821:points:%d", i), "8821")
		want(t, "failed call", a, 503, "FAILED")
	}
	if n := s.Net("8821"); n != 0 {
		t.Errorf("Net = %d after failed calls, want 0", n)
	}
	if n := s.TotalCalls(); n != 3 {
		t.Errorf("TotalCalls = %d, want 3 (refused calls were received)", n)
	}
	calls := s.Calls("8821")
	if len(calls) != 3 {
		t.Fatalf("Calls = %+v, want the 3 refused calls", calls)
	}
	for i, c := range calls {
		if c.Failed != 503 || c.EffectID != 0 || c.RequestID != fmt.Sprintf("8821:points:%d", i) {
			t.Errorf("Calls[%d] = %+v, want Failed 503, no effect id", i, c)
		}
	}
	want(t, "compensate a refused call", post(t, c, s, "/compensate", q("biz_id", "8821")), 404, "NOT_FOUND")
	want(t, "status of a failed call", get(t, c, s, "/status", q("request_id", "8821:points:0")), 404, "NOT_FOUND")
	mu.Lock()
	if hooks != 0 {
		t.Errorf("OnCall ran %d times for failed calls", hooks)
	}
	mu.Unlock()

	// Only /call is faulted.
	want(t, "effects probe", get(t, c, s, "/effects", q("biz_id", "8821")), 200, "")

	s.SetFault("8821", Fault{Fail: 42}) // not an HTTP status
	want(t, "invalid Fail", call(t, c, s, "8821:points:x", "8821"), 500, "FAILED")

	s.ClearFaults()
	a := call(t, c, s, "8821:points", "8821")
	want(t, "after ClearFaults", a, 200, "APPLIED")
	if a.EffectID != 1 {
		t.Errorf("first applied effect_id = %d, want 1 (refused calls have none)", a.EffectID)
	}
	if n := s.Net("8821"); n != 1 {
		t.Errorf("Net = %d, want 1", n)
	}
}

func TestFaultTimes(t *testing.T) {
	s := start(t, "logistics")
	s.SetFault("F-1", Fault{Fail: 500, Times: 2})
	c := client(t, 10*time.Second)

	want(t, "call 1", call(t, c, s, "r-1", "F-1"), 500, "FAILED")
	want(t, "other biz id is not faulted", call(t, c, s, "r-x", "F-2"), 200, "APPLIED")
	want(t, "call 2", call(t, c, s, "r-2", "F-1"), 500, "FAILED")
	want(t, "call 3", call(t, c, s, "r-3", "F-1"), 200, "APPLIED")
	want(t, "call 4", call(t, c, s, "r-4", "F-1"), 200, "APPLIED")
	if n := s.Net("F-1"); n != 2 {
		t.Errorf("Net(F-1) = %d, want 2", n)
	}

	// A bad request does not spend the budget.
	s.SetFault("F-3", Fault{Fail: 502, Times: 1})
	want(t, "bad request", mustDo(t, c, callReq(t, context.Background(), s, `{"biz_id":"F-3"}`)), 400, "BAD_REQUEST")
	want(t, "F-3 call 1", call(t, c, s, "r-5", "F-3"), 502, "FAILED")
	want(t, "F-3 call 2", call(t, c, s, "r-6", "F-3"), 200, "APPLIED")

	// A new SetFault replaces the old one.
	s.SetFault("F-4", Fault{Fail: 500})
	s.SetFault("F-4", Fault{Fail: 409, Times: 1})
	want(t, "replaced fault", call(t, c, s, "r-7", "F-4"), 409, "FAILED")
	want(t, "replaced fault spent", call(t, c, s, "r-8", "F-4"), 200, "APPLIED")
}

func TestFaultTimesConcurrent(t *testing.T) {
	s := start(t, "notify")
	s.SetFault("PAY-1", Fault{Fail: 500, Times: 3})
	c := client(t, 10*time.Second)
	const n = 20
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := do(t, c, callReq(t, context.Background(), s, callBody(fmt.Sprint("r-", i), "PAY-1")))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			codes <- a.Code
		})
		// Faults are changed concurrently for other ids.
		s.SetFault(fmt.Sprint("other-", i), Fault{Fail: 500})
	}
	wg.Wait()
	close(codes)
	failed := 0
	for code := range codes {
		if code == 500 {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d calls failed, want exactly 3 (Times)", failed)
	}
	if got := s.Net("PAY-1"); got != n-3 {
		t.Errorf("Net = %d, want %d", got, n-3)
	}
}

func TestCloseReleasesBlockedHandler(t *testing.T) {
	before := runtime.NumGoroutine()

	s, err := Start("wms")
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan struct{}, 2)
	s.OnCall(func(Call) { applied <- struct{}{} })
	s.SetFault("F-1", Fault{Block: make(chan struct{})}) // never closed
	s.SetFault("F-2", Fault{Delay: time.Hour})
	tr := &http.Transport{}
	c := &http.Client{Transport: tr} // no timeout: only Close can end it

	errc := make(chan error, 2)
	for _, biz := range []string{"F-1", "F-2"} {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, s.URL+"/call", strings.NewReader(callBody(biz+":wms", biz)))
			resp, err := c.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					err = fmt.Errorf("got an answer %d", resp.StatusCode)
				}
			}
			errc <- err
		}()
	}
	<-applied
	<-applied

	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range 2 {
		if err := <-errc; err == nil || strings.Contains(err.Error(), "got an answer") {
			t.Errorf("held call after Close: %v, want no answer (connection dropped)", err)
		}
	}
	if n := s.Net("F-1") + s.Net("F-2"); n != 2 {
		t.Errorf("Net after Close = %d, want 2 (effects were applied)", n)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(s.URL + "/status?request_id=x"); err == nil {
		t.Error("closed service still answers")
	}
	tr.CloseIdleConnections()

	// Goroutines wind down asynchronously (the transport's conn loops):
	// poll, do not time.
	var now int
	for range 500 {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d before, %d after Close\n%s", before, now, buf[:runtime.Stack(buf, true)])
}

func TestSet(t *testing.T) {
	set, err := StartSet()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	u := set.URLs()
	seen := map[string]bool{}
	for name, got := range map[string]struct {
		url string
		svc *Service
	}{
		"notify": {u.Notify, set.Notify}, "wms": {u.WMS, set.WMS},
		"logistics": {u.Logistics, set.Logistics}, "points": {u.Points, set.Points},
	} {
		if got.svc == nil || got.svc.Name != name || got.url != got.svc.URL || got.url == "" {
			t.Errorf("%s: service %+v, URL %q", name, got.svc, got.url)
			continue
		}
		if seen[got.url] {
			t.Errorf("%s shares URL %s", name, got.url)
		}
		seen[got.url] = true
	}
	c := client(t, 10*time.Second)
	call(t, c, set.WMS, "F-1:wms", "F-1")
	if set.WMS.Net("F-1") != 1 || set.Logistics.Net("F-1") != 0 {
		t.Error("a call to wms was seen by another service")
	}
	req, _ := http.NewRequest(http.MethodGet, u.WMS+"/status?request_id=F-1:wms", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Downstream-Service") != "wms" {
		t.Errorf("X-Downstream-Service = %q", resp.Header.Get("X-Downstream-Service"))
	}
	if got := len(set.Services()); got != 4 {
		t.Errorf("Services() = %d", got)
	}
}

func TestCallPayloadKeptVerbatim(t *testing.T) {
	s := start(t, "notify")
	c := client(t, 10*time.Second)
	body := `{"request_id":"r","biz_id":"b","payload":{"amount":"30.00","accounts":[1,2]}}`
	mustDo(t, c, callReq(t, context.Background(), s, body))
	mustDo(t, c, callReq(t, context.Background(), s, `{"request_id":"r2","biz_id":"b"}`))
	calls := s.Calls("b")
	if len(calls) != 2 || !bytes.Equal(calls[0].Payload, []byte(`{"amount":"30.00","accounts":[1,2]}`)) || calls[1].Payload != nil {
		t.Errorf("payloads: %+v", calls)
	}
}

func postKeyed(t *testing.T, c *http.Client, s *Service, path string, qv url.Values, key string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path+"?"+qv.Encode(), strings.NewReader(`{"plan_id":"p"}`))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return mustDo(t, c, req)
}

// TestSeedPaths: the paths the seeds' presets probe, compensate and
// redrive at (sources/config/presets/seed001.yaml, seed003.yaml) count the
// operation's live effects, and their POSTs take effect once per
// Idempotency-Key.
func TestSeedPaths(t *testing.T) {
	c := client(t, 10*time.Second)
	wms, logistics, points := start(t, NameWMS), start(t, NameLogistics), start(t, NamePoints)

	call(t, c, wms, "r-1", "SO-1:PAID")
	call(t, c, wms, "r-2", "SO-1:PAID")
	call(t, c, wms, "r-3", "SO-1:SPLIT")
	count := func(s *Service, path, param, id string, n int) {
		t.Helper()
		a := get(t, c, s, path, q(param, id))
		if a.Code != 200 || a.Count == nil || *a.Count != n {
			t.Errorf("GET %s %s=%s: %d %s, want count %d", path, param, id, a.Code, strings.TrimSpace(a.Raw), n)
		}
	}
	count(wms, "/locks", "biz_id", "SO-1:PAID", 2)
	count(wms, "/locks", "biz_id", "SO-1:SPLIT", 1)
	count(wms, "/locks", "biz_id", "SO-2:PAID", 0)

	a := postKeyed(t, c, wms, "/locks/release", q("biz_id", "SO-1:PAID"), "plan-1:1")
	want(t, "release", a, 200, "COMPENSATED")
	if a.EffectID != 2 {
		t.Errorf("released effect %d, want the newest live of SO-1:PAID (2)", a.EffectID)
	}
	again := postKeyed(t, c, wms, "/locks/release", q("biz_id", "SO-1:PAID"), "plan-1:1")
	want(t, "release again, same key", again, 200, "COMPENSATED")
	if again.EffectID != 2 {
		t.Errorf("the same key answered effect %d, want the first answer's 2", again.EffectID)
	}
	count(wms, "/locks", "biz_id", "SO-1:PAID", 1)
	count(wms, "/locks", "biz_id", "SO-1:SPLIT", 1)
	want(t, "release without key", postKeyed(t, c, wms, "/locks/release", q("biz_id", "SO-1:PAID"), ""), 400, "BAD_REQUEST")
	want(t, "release without biz_id", postKeyed(t, c, wms, "/locks/release", nil, "k"), 400, "BAD_REQUEST")
	want(t, "GET /locks/release", get(t, c, wms, "/locks/release", q("biz_id", "x")), 405, "METHOD_NOT_ALLOWED")
	count(wms, "/locks", "biz_id", "SO-1:PAID", 1)

	call(t, c, logistics, "w-1", "SO-1:PAID")
	count(logistics, "/waybills", "biz_id", "SO-1:PAID", 1)

	count(points, "/grants", "order_id", "8821", 0)
	want(t, "grant", postKeyed(t, c, points, "/grant", q("order_id", "8821"), "plan-2:2"), 200, "APPLIED")
	want(t, "grant again, same key", postKeyed(t, c, points, "/grant", q("order_id", "8821"), "plan-2:2"), 200, "APPLIED")
	count(points, "/grants", "order_id", "8821", 1)
	want(t, "grant, another key", postKeyed(t, c, points, "/grant", q("order_id", "8821"), "plan-3:1"), 200, "APPLIED")
	count(points, "/grants", "order_id", "8821", 2)
	want(t, "grant without key", postKeyed(t, c, points, "/grant", q("order_id", "8821"), ""), 400, "BAD_REQUEST")
	want(t, "grant without order_id", postKeyed(t, c, points, "/grant", nil, "plan-4:1"), 400, "BAD_REQUEST")
	count(points, "/grants", "order_id", "8821", 2)
	calls := points.Calls("8821")
	if len(calls) != 2 || calls[0].RequestID != "plan-2:2" || string(calls[0].Payload) != `{"plan_id":"p"}` {
		t.Errorf("points journal of 8821: %+v", calls)
	}

	// Each path belongs to its service only.
	resp, err := c.Get(start(t, NameNotify).URL + "/locks?biz_id=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("notify GET /locks: %d, want 404", resp.StatusCode)
	}
}

// TestGrantOnceConcurrent: concurrent POSTs with one Idempotency-Key apply
// one effect.
func TestGrantOnceConcurrent(t *testing.T) {
	s := start(t, NamePoints)
	c := client(t, 10*time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := postKeyed(t, c, s, "/grant", q("order_id", "1"), "k")
			if a.Code != 200 {
				t.Errorf("grant: %d %s", a.Code, a.Raw)
			}
		}()
	}
	wg.Wait()
	if n := s.Net("1"); n != 1 {
		t.Errorf("8 concurrent grants with one key: %d effects, want 1", n)
	}
}
