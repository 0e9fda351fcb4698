package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
)

var (
	applied = []string{"APPLIED", "SUCCESS"}
	absent  = []string{"NOT_FOUND"}
)

// answer serves a fixed status code and body.
func answer(t *testing.T, code int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("method = %s, want GET", r.Method)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/notify/status?request_id=PAY-1%3Anotify%3A1"
}

func TestProbeRules(t *testing.T) {
	t.Parallel()
	two, zero := 2, 0
	cases := []struct {
		name    string
		code    int
		body    string
		outcome string
		status  string
		count   *int
		detail  string // substring of Detail
	}{
		{"applied status", 200, `{"status":"APPLIED"}`, sources.ProbeApplied, "APPLIED", nil, ""},
		{"second applied value", 200, `{"status":"SUCCESS","extra":[1,2]}`, sources.ProbeApplied, "SUCCESS", nil, ""},
		{"absent status", 200, `{"status":"NOT_FOUND"}`, sources.ProbeAbsent, "NOT_FOUND", nil, ""},
		{"other status", 200, `{"status":"PROCESSING"}`, sources.ProbeInconclusive, "PROCESSING", nil, `status "PROCESSING"`},
		{"status compared exactly", 200, `{"status":"applied"}`, sources.ProbeInconclusive, "applied", nil, `"applied"`},
		{"status not a string", 200, `{"status":1}`, sources.ProbeInconclusive, "", nil, "not a string"},
		{"no status", 200, `{"ok":true}`, sources.ProbeInconclusive, "", nil, `no "status"`},
		{"404 is absent", 404, `whatever`, sources.ProbeAbsent, "", nil, "HTTP 404"},
		{"500", 500, `{"status":"APPLIED"}`, sources.ProbeInconclusive, "", nil, "HTTP 500"},
		{"403", 403, ``, sources.ProbeInconclusive, "", nil, "HTTP 403"},
		{"202 counts as 2xx", 202, `{"status":"APPLIED"}`, sources.ProbeApplied, "APPLIED", nil, ""},
		{"not JSON", 200, `<html>ok</html>`, sources.ProbeInconclusive, "", nil, "not a JSON object"},
		{"JSON but not an object", 200, `["APPLIED"]`, sources.ProbeInconclusive, "", nil, "not a JSON object"},
		{"empty body", 200, ``, sources.ProbeInconclusive, "", nil, "not a JSON object"},
		{"count 2", 200, `{"count":2,"locks":["a","b"]}`, sources.ProbeApplied, "", &two, ""},
		{"count 0", 200, `{"count":0}`, sources.ProbeAbsent, "", &zero, ""},
		{"count wins over status", 200, `{"count":0,"status":"APPLIED"}`, sources.ProbeAbsent, "APPLIED", &zero, ""},
		{"count negative", 200, `{"count":-1}`, sources.ProbeInconclusive, "", nil, "not a non-negative integer"},
		{"count fractional", 200, `{"count":1.5}`, sources.ProbeInconclusive, "", nil, "not a non-negative integer"},
		{"count a string", 200, `{"count":"2"}`, sources.ProbeInconclusive, "", nil, "not a non-negative integer"},
	}
	c := New(2 * time.Second)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := answer(t, tc.code, tc.body)
			got := c.Probe(context.Background(), u, applied, absent)
			if got.Outcome != tc.outcome || got.Status != tc.status {
				t.Errorf("got %+v, want outcome %s status %q", got, tc.outcome, tc.status)
			}
			if (got.Count == nil) != (tc.count == nil) || (got.Count != nil && *got.Count != *tc.count) {
				t.Errorf("count = %v, want %v", got.Count, tc.count)
			}
			if tc.detail != "" && !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("detail = %q, want it to contain %q", got.Detail, tc.detail)
			}
			if got.Outcome == sources.ProbeInconclusive && got.Detail == "" {
				t.Errorf("inconclusive without a detail: %+v", got)
			}
			if got.URL != u {
				t.Errorf("URL = %q, want %q", got.URL, u)
			}
		})
	}
}

func TestProbeBodyLimit(t *testing.T) {
	t.Parallel()
	big := `{"status":"APPLIED","pad":"` + strings.Repeat("x", MaxBody) + `"}`
	got := New(2*time.Second).Probe(context.Background(), answer(t, 200, big), applied, absent)
	if got.Outcome != sources.ProbeInconclusive || !strings.Contains(got.Detail, "64 KiB") {
		t.Errorf("got %+v, want inconclusive: body over 64 KiB", got)
	}
}

func TestProbeTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		fmt.Fprint(w, `{"status":"APPLIED"}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	got := New(100*time.Millisecond).Probe(context.Background(), srv.URL+"/s?request_id=1", applied, absent)
	if got.Outcome != sources.ProbeInconclusive || got.Detail != "timeout after 100ms" {
		t.Errorf("got %+v, want inconclusive, timeout after 100ms", got)
	}
}

func TestProbeSlowBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, `{"status":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	got := New(100*time.Millisecond).Probe(context.Background(), srv.URL, applied, absent)
	if got.Outcome != sources.ProbeInconclusive || !strings.Contains(got.Detail, "timeout after 100ms") {
		t.Errorf("got %+v, want inconclusive with a timeout while reading the body", got)
	}
}

func TestProbeCallerDeadline(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	got := New(time.Minute).Probe(ctx, srv.URL, applied, absent)
	if got.Outcome != sources.ProbeInconclusive || !strings.HasPrefix(got.Detail, "timeout") {
		t.Errorf("got %+v, want inconclusive timeout", got)
	}
}

func TestProbeConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	got := New(2*time.Second).Probe(context.Background(), "http://"+addr+"/s", applied, absent)
	if got.Outcome != sources.ProbeInconclusive || got.Detail != "connection refused" {
		t.Errorf("got %+v, want inconclusive, connection refused", got)
	}
}

func TestProbeStripsUserinfo(t *testing.T) {
	t.Parallel()
	var gotUser, gotPass string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser, gotPass, _ = r.BasicAuth()
		w.WriteHeader(500)
	}))
	t.Cleanup(srv.Close)
	u := strings.Replace(srv.URL, "http://", "http://ops:s3cretpw@", 1) + "/s?request_id=x"
	got := New(2*time.Second).Probe(context.Background(), u, applied, absent)
	if strings.Contains(got.URL, "s3cretpw") || strings.Contains(got.URL, "ops@") || strings.Contains(got.Detail, "s3cretpw") {
		t.Errorf("credentials leak: %+v", got)
	}
	if got.URL != srv.URL+"/s?request_id=x" || got.Detail != "HTTP 500" {
		t.Errorf("got %+v", got)
	}
	if gotUser != "ops" || gotPass != "s3cretpw" {
		t.Errorf("basic auth sent = %q/%q, want the URL's userinfo", gotUser, gotPass)
	}

	// Unreachable, with credentials: the error path must not show them either.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	got = New(2*time.Second).Probe(context.Background(), "http://ops:s3cretpw@"+addr+"/s", applied, absent)
	if strings.Contains(got.URL+got.Detail, "s3cretpw") || strings.Contains(got.URL, "ops") {
		t.Errorf("credentials leak on error: %+v", got)
	}
}

func TestProbeInvalidURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ftp://h/x", "127.0.0.1:8081/x", "http://u:pw@/x", "://"} {
		got := New(time.Second).Probe(context.Background(), u, applied, absent)
		if got.Outcome != sources.ProbeInconclusive || !strings.Contains(got.Detail, "invalid probe URL") || strings.Contains(got.URL+got.Detail, "pw") {
			t.Errorf("Probe(%q) = %+v", u, got)
		}
	}
}

// TestProbeStalledAnswer: a downstream whose answer stops after N bytes
// (a TCP proxy that stops forwarding: inside the status line, the headers,
// the body) is inconclusive within the probe's timeout, and a cancelled
// context (an interrupt) ends the probe at once.
func TestProbeStalledAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"APPLIED","padding":"`+strings.Repeat("x", 200)+`"}`)
	}))
	t.Cleanup(srv.Close)
	target := strings.TrimPrefix(srv.URL, "http://")
	for _, n := range []int{0, 5, 60, 150} {
		t.Run(fmt.Sprintf("after %d bytes", n), func(t *testing.T) {
			t.Parallel()
			p := testenv.NewStallProxy(t, target, n)
			got := New(200*time.Millisecond).Probe(context.Background(), "http://"+p.Addr+"/s?request_id=1", applied, absent)
			if got.Outcome != sources.ProbeInconclusive || !strings.Contains(got.Detail, "timeout after 200ms") {
				t.Errorf("got %+v, want inconclusive, timeout after 200ms", got)
			}
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-p.Stalled(); cancel() }()
			got = New(time.Minute).Probe(ctx, "http://"+p.Addr+"/s?request_id=2", applied, absent)
			if got.Outcome != sources.ProbeInconclusive || !strings.Contains(got.Detail, "cancelled") {
				t.Errorf("interrupted: got %+v, want inconclusive, cancelled", got)
			}
		})
	}
}
