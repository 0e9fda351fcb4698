package httpd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ReadTargets is bounded and says what failed: a watch that hangs, one
// that answers an error status, one that answers something else.
func TestReadTargetsFailures(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	if evs, err := ReadTargets(context.Background(), http.DefaultClient, hang.URL+"/targets", 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer within 50ms") || evs != nil {
		t.Fatalf("a hanging watch: %v %v", evs, err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready: mysql does not answer", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	if _, err := ReadTargets(context.Background(), http.DefaultClient, bad.URL+"/targets", time.Second); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "mysql does not answer") {
		t.Fatalf("an error status: %v", err)
	}
	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer notJSON.Close()
	if _, err := ReadTargets(context.Background(), http.DefaultClient, notJSON.URL+"/targets", time.Second); err == nil || !strings.Contains(err.Error(), "not the JSON array") {
		t.Fatalf("not JSON: %v", err)
	}
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for range MaxTargetsBytes>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer big.Close()
	if _, err := ReadTargets(context.Background(), http.DefaultClient, big.URL+"/targets", 10*time.Second); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an answer too large: %v", err)
	}
}

func TestTargetsURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:9464":         "http://127.0.0.1:9464/targets",
		"http://127.0.0.1:9464/":        "http://127.0.0.1:9464/targets",
		"http://127.0.0.1:9464/targets": "http://127.0.0.1:9464/targets",
		"https://watch.example/opctl/":  "https://watch.example/opctl/targets",
		"127.0.0.1:9464":                "",
		"ftp://x":                       "",
		"http://127.0.0.1:9464/?a=b":    "",
		"http://":                       "",
	} {
		got, err := TargetsURL(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("TargetsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// ReadReady says why a watch is not ready, and nothing when it is.
func TestReadReady(t *testing.T) {
	var notReady atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if notReady.Load() {
			http.Error(w, "not ready: kafka does not answer (since x: EOF)", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	u := ReadyURL(srv.URL + "/targets")
	if why, err := ReadReady(context.Background(), http.DefaultClient, u, time.Second); why != "" || err != nil {
		t.Fatalf("ready: %q %v", why, err)
	}
	notReady.Store(true)
	if why, err := ReadReady(context.Background(), http.DefaultClient, u, time.Second); why != "not ready: kafka does not answer (since x: EOF)" || err != nil {
		t.Fatalf("not ready: %q %v", why, err)
	}
}
