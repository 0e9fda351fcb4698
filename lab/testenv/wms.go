package testenv

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// WMS is seed 001's warehouse as the repair tests play it: a lock journal
// probed by {biz_id} at /wms/locks ({"count": N}: F-1 holds two locks,
// every other order one) and a compensation at /wms/compensate that
// releases one of F-1's locks after the delay, then answers. What a
// request does does not depend on its caller still waiting (a real
// downstream does not notice a client that went away) unless abandon is
// set: then a request whose caller left before the delay ends takes no
// effect. With honour, a POST whose Idempotency-Key took effect before
// answers as the first did and changes nothing. Blind makes the probe
// answer 503 (it cannot tell). Entered receives one value as each POST
// arrives (up to 64 unread).
type WMS struct {
	// URL is the service's base URL (the config's ${OPCTL_WMS_URL}).
	URL     string
	Entered chan struct{}

	mu      sync.Mutex
	locks   int
	posts   int
	effects int
	delay   time.Duration
	honour  bool
	abandon bool
	blind   bool
	seen    map[string]bool
}

// NewWMS starts a WMS whose compensation takes delay, stopped when the
// test ends.
func NewWMS(t testing.TB, delay time.Duration) *WMS {
	w := &WMS{locks: 2, delay: delay, seen: map[string]bool{}, Entered: make(chan struct{}, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("/wms/locks", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.blind {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		n := w.locks
		if r.URL.Query().Get("biz_id") != "F-1" {
			n = 1
		}
		fmt.Fprintf(rw, `{"count":%d}`, n)
	})
	mux.HandleFunc("/wms/compensate", func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices a caller that leaves
		w.mu.Lock()
		w.posts++
		d, abandon := w.delay, w.abandon
		w.mu.Unlock()
		select {
		case w.Entered <- struct{}{}:
		default:
		}
		until := time.Now().Add(d)
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			if abandon {
				return
			}
			time.Sleep(time.Until(until)) // the work goes on
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if w.honour && w.seen[key] {
			fmt.Fprint(rw, `{"status":"COMPENSATED","replayed":true}`)
			return
		}
		w.seen[key] = true
		w.locks--
		w.effects++
		fmt.Fprint(rw, `{"status":"COMPENSATED"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	w.URL = srv.URL
	return w
}

// Counts are F-1's locks, the POSTs received and the compensations that
// took effect.
func (w *WMS) Counts() (locks, posts, effects int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.locks, w.posts, w.effects
}

// Reset puts F-1's two locks back and forgets every POST.
func (w *WMS) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.locks, w.posts, w.effects, w.seen = 2, 0, 0, map[string]bool{}
	for len(w.Entered) > 0 {
		<-w.Entered
	}
}

// Delay is how long a compensation takes.
func (w *WMS) Delay() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delay
}

// SetAbandon sets whether a request whose caller left takes no effect.
func (w *WMS) SetAbandon(on bool) { w.set(&w.abandon, on) }

// SetHonour sets whether the Idempotency-Key is honoured.
func (w *WMS) SetHonour(on bool) { w.set(&w.honour, on) }

// SetBlind sets whether the probe answers 503.
func (w *WMS) SetBlind(on bool) { w.set(&w.blind, on) }

func (w *WMS) set(f *bool, on bool) {
	w.mu.Lock()
	*f = on
	w.mu.Unlock()
}
