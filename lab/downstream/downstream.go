// Package downstream runs the incident lab's fake downstream services: real
// net/http servers on 127.0.0.1 that apply a (non-idempotent) effect per call
// and keep a journal of every call, with per-operation fault injection.
//
// Every service speaks the same HTTP API; the lab names them "notify" (risk /
// clearing notify, seed 000), "wms" (stock lock, seed 001), "logistics"
// (waybill, seed 001) and "points" (points grant, seed 003). None of them is
// idempotent: every accepted call is a new effect, whatever its request id,
// like the seeds' downstreams.
//
//	POST /call                    body {"request_id": "...", "biz_id": "...", "payload": any}
//	                              applies one effect: 200 {"status":"APPLIED","effect_id":N};
//	                              a missing request_id or biz_id: 400, nothing applied
//	POST /compensate?request_id=X reverses one live effect of request X (the newest):
//	POST /compensate?biz_id=X     or the newest live effect of operation X:
//	                              200 {"status":"COMPENSATED","effect_id":N};
//	                              none live: 404 {"status":"NOT_FOUND"}
//	GET  /status?request_id=X     200 {"status":"APPLIED"} while a live effect of X exists,
//	                              200 {"status":"COMPENSATED"} once all of them are reversed,
//	                              404 {"status":"NOT_FOUND"} when X never took effect
//	GET  /effects?biz_id=X        200 {"count":N}, N = live (applied − compensated) effects
//	GET  /journal[?biz_id=X]      200 [entries...] for humans (every call, in order)
//
// /status follows opctl's probe convention keyed by request id and /effects
// the one keyed by biz id (docs/where.md): a 404 is "absent", "count" is the
// number of effects the service holds for the operation.
//
// A service also answers at the paths the seeds' presets use
// (sources/config/presets/seed001.yaml, seed003.yaml), by its name:
//
//	wms        GET  /locks?biz_id=X          as /effects?biz_id=X: {"count":N}
//	           POST /locks/release?biz_id=X  as /compensate?biz_id=X, once per Idempotency-Key
//	logistics  GET  /waybills?biz_id=X       as /effects?biz_id=X
//	points     GET  /grants?order_id=X       as /effects?biz_id=X
//	           POST /grant?order_id=X        applies one effect of operation X once per
//	                                         Idempotency-Key header (required: 400 without):
//	                                         a second POST with the same key answers the
//	                                         first answer again and applies nothing
//
// The once-per-key endpoints are how a downstream serves opctl's
// compensate and redrive POSTs, which carry an Idempotency-Key
// (docs/repair.md).
//
// Faults (SetFault) apply to POST /call only, per biz id: an answer that is
// delayed or held after the effect was applied (the caller times out although
// the effect happened, seed 001), or an error status without applying.
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
	"slices"
	"sync"
	"time"
)

// Service names used by the lab.
const (
	NameNotify    = "notify"
	NameWMS       = "wms"
	NameLogistics = "logistics"
	NamePoints    = "points"
)

// maxBody bounds a /call request body.
const maxBody = 1 << 20

// Call is one POST /call the service received for a biz id: one effect,
// unless a Fail fault refused it.
type Call struct {
	// EffectID numbers the service's effects from 1, in the order applied;
	// 0 for a call refused by a Fail fault.
	EffectID int64 `json:"effect_id"`
	// RequestID and BizID are the caller's, as sent.
	RequestID string `json:"request_id"`
	BizID     string `json:"biz_id"`
	// Payload is the caller's payload, verbatim (nil when none was sent).
	Payload json.RawMessage `json:"payload,omitempty"`
	// At is when the call was received and its effect applied (the
	// service's clock).
	At time.Time `json:"at"`
	// Failed is the status a Fail fault answered; such a call applied
	// nothing (0 for an applied call).
	Failed int `json:"failed,omitempty"`
	// Compensated says whether the effect was reversed by /compensate, and
	// CompensatedAt when (zero while live).
	Compensated   bool      `json:"compensated"`
	CompensatedAt time.Time `json:"compensated_at,omitzero"`
}

// Fault changes how the service answers POST /call for one biz id.
//
// Fail wins over the others' "apply" part: a Fail call applies nothing,
// but its answer is still held by Delay or Block when they are set (a slow
// failure). Delay and Block may be combined; the answer waits for both.
type Fault struct {
	// Delay applies the effect, then waits Delay before answering: a caller
	// with a shorter timeout gives up although the effect happened
	// (seed 001's WMS call). The wait ends early when the caller goes away
	// or the service is closed.
	Delay time.Duration
	// Block applies the effect, then holds the answer until Block is
	// closed, the request's context ends (the caller gave up) or the
	// service is closed.
	Block <-chan struct{}
	// Fail, when non-zero, answers this HTTP status without applying the
	// effect (the call is journaled with Failed set). A value outside
	// 200–599 is answered as 500.
	Fail int
	// Times limits the fault to the next Times calls of the biz id; 0
	// means every call until ClearFaults.
	Times int
}

// faultState is a Fault with what is left of its Times budget.
type faultState struct {
	f    Fault
	left int // calls left; -1 = unlimited
}

// Service is one running fake downstream service.
type Service struct {
	// Name is the service's name ("notify", "wms", ...), used in error
	// answers and in the X-Downstream-Service response header.
	Name string
	// URL is the service's base URL, like http://127.0.0.1:PORT (no
	// trailing slash): endpoints are URL+"/call", URL+"/status?..." ...
	URL string

	srv     *http.Server
	served  chan struct{} // closed when Serve returned
	closing chan struct{} // closed by Close: releases held answers
	handler sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	// keyMu serialises the once-per-Idempotency-Key endpoints.
	keyMu   sync.Mutex
	mu      sync.Mutex
	journal []Call           // every call received, in order
	effects int64            // effects applied so far (the last EffectID)
	byBiz   map[string][]int // biz id -> journal indexes
	byReq   map[string][]int // request id -> journal indexes
	faults  map[string]*faultState
	onCall  []func(Call)
	closed  bool
	// keyed are the answers of the once-per-Idempotency-Key endpoints, by
	// path and key.
	keyed map[string]keyedAnswer
}

// keyedAnswer is the answer an Idempotency-Key got the first time.
type keyedAnswer struct {
	status int
	body   map[string]any
}

// Start starts a service called name on 127.0.0.1 on a free port.
func Start(name string) (*Service, error) {
	if name == "" {
		return nil, errors.New("downstream: start: empty service name")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("downstream: start %s: listen on 127.0.0.1: %w", name, err)
	}
	s := &Service{
		Name:    name,
		URL:     "http://" + ln.Addr().String(),
		served:  make(chan struct{}),
		closing: make(chan struct{}),
		byBiz:   make(map[string][]int),
		byReq:   make(map[string][]int),
		faults:  make(map[string]*faultState),
		keyed:   make(map[string]keyedAnswer),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/call", s.handleCall)
	mux.HandleFunc("/compensate", s.handleCompensate)
	mux.HandleFunc("/status", s.handleStatus)
	mux.HandleFunc("/effects", s.handleEffects)
	mux.HandleFunc("/journal", s.handleJournal)
	switch name {
	case NameWMS:
		mux.HandleFunc("/locks", s.handleCount("biz_id"))
		mux.HandleFunc("/locks/release", s.once(s.releaseBy("biz_id")))
	case NameLogistics:
		mux.HandleFunc("/waybills", s.handleCount("biz_id"))
	case NamePoints:
		mux.HandleFunc("/grants", s.handleCount("order_id"))
		mux.HandleFunc("/grant", s.once(s.applyBy("order_id")))
	}
	s.srv = &http.Server{
		Handler:           s.track(mux),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	}()
	return s, nil
}

// track counts running handlers so Close can wait for every one of them.
func (s *Service) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "CLOSED", "error": s.Name + " is shutting down"})
			return
		}
		s.handler.Add(1)
		s.mu.Unlock()
		defer s.handler.Done()
		w.Header().Set("X-Downstream-Service", s.Name)
		h.ServeHTTP(w, r)
	})
}

// Close stops the service: it stops accepting connections, releases every
// answer held by a Delay or Block fault (the caller gets no answer: its
// connection is dropped, as when a real service dies after applying the
// effect), and waits for every handler to return. The journal stays
// readable through the Go API. Close is safe to call more than once.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
		// No handler can be held now, so Shutdown needs no deadline.
		if err := s.srv.Shutdown(context.Background()); err != nil {
			s.closeErr = fmt.Errorf("downstream: close %s at %s: %w", s.Name, s.URL, err)
		}
		<-s.served
		s.handler.Wait()
	})
	return s.closeErr
}

// SetFault installs f for the calls of bizID, replacing any fault it had.
func (s *Service) SetFault(bizID string, f Fault) {
	left := -1
	if f.Times > 0 {
		left = f.Times
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[bizID] = &faultState{f: f, left: left}
}

// ClearFaults removes every fault. Answers already held by a Block or Delay
// fault stay held until their own release.
func (s *Service) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// OnCall registers fn to be called after each effect is applied, before
// any fault delays or holds the answer (so a scenario can wait for "the
// WMS lock took effect"). fn runs on the request's goroutine, without the
// service's lock held (it may call the service's methods); it must not
// block for long, since the caller is waiting for its answer. A Fail call
// applies nothing and does not call fn.
func (s *Service) OnCall(fn func(Call)) {
	if fn == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCall = append(s.onCall, fn)
}

// Net returns the number of live effects (applied and not compensated) of
// bizID.
func (s *Service) Net(bizID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(s.byBiz[bizID])
}

// Calls returns every call received for bizID, in order: applied effects
// (compensated ones included) and calls refused by a Fail fault (Failed
// set, EffectID 0). A request rejected as malformed (400) is not a call.
func (s *Service) Calls(bizID string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copyLocked(s.byBiz[bizID])
}

// TotalCalls returns the number of calls the service received, for every
// biz id: effects applied (compensated ones included) and calls refused by
// a Fail fault. Malformed requests (400) are not counted.
func (s *Service) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.journal)
}

func (s *Service) liveLocked(idx []int) int {
	n := 0
	for _, i := range idx {
		if c := s.journal[i]; c.Failed == 0 && !c.Compensated {
			n++
		}
	}
	return n
}

func (s *Service) copyLocked(idx []int) []Call {
	out := make([]Call, 0, len(idx))
	for _, i := range idx {
		out = append(out, s.journal[i])
	}
	return out
}

// callRequest is the body of POST /call.
type callRequest struct {
	RequestID string          `json:"request_id"`
	BizID     string          `json:"biz_id"`
	Payload   json.RawMessage `json:"payload"`
}

func (s *Service) handleCall(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	var req callRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.badRequest(w, "read /call body: %v", err)
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.badRequest(w, "/call body is not a JSON object {request_id, biz_id, payload}: %v", err)
		return
	}
	if req.RequestID == "" || req.BizID == "" {
		s.badRequest(w, "/call needs a non-empty request_id and biz_id (got request_id %q, biz_id %q)", req.RequestID, req.BizID)
		return
	}
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		req.Payload = nil
	}

	f, faulted := s.takeFault(req.BizID)
	if faulted && f.Fail != 0 {
		status := f.Fail
		if status < 200 || status > 599 {
			status = http.StatusInternalServerError
		}
		s.record(req, status)
		if !s.hold(r.Context(), f) {
			panic(http.ErrAbortHandler) // closed while held: no answer
		}
		writeJSON(w, status, map[string]string{"status": "FAILED", "error": fmt.Sprintf("%s: injected fault for biz_id %q", s.Name, req.BizID)})
		return
	}

	c, hooks := s.record(req, 0)
	for _, fn := range hooks {
		fn(c)
	}
	if faulted && !s.hold(r.Context(), f) {
		// The service "died" after applying the effect: drop the
		// connection without an answer.
		panic(http.ErrAbortHandler)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "APPLIED", "effect_id": c.EffectID})
}

// takeFault returns the fault for bizID, if any, spending one of its Times.
func (s *Service) takeFault(bizID string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs, ok := s.faults[bizID]
	if !ok {
		return Fault{}, false
	}
	if fs.left > 0 {
		fs.left--
		if fs.left == 0 {
			delete(s.faults, bizID)
		}
	}
	return fs.f, true
}

// record journals one call, applying its effect unless failed (the status
// a Fail fault answers) is set, and returns it with the OnCall hooks to run.
func (s *Service) record(req callRequest, failed int) (Call, []func(Call)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Call{
		RequestID: req.RequestID,
		BizID:     req.BizID,
		Payload:   req.Payload,
		At:        time.Now(),
		Failed:    failed,
	}
	if failed == 0 {
		s.effects++
		c.EffectID = s.effects
	}
	i := len(s.journal)
	s.journal = append(s.journal, c)
	s.byBiz[c.BizID] = append(s.byBiz[c.BizID], i)
	s.byReq[c.RequestID] = append(s.byReq[c.RequestID], i)
	return c, slices.Clone(s.onCall)
}

// hold waits as f says before an answer. It reports false when the service
// was closed meanwhile (the answer must then be dropped); a caller that
// went away ends the wait too (true: nobody reads the answer anyway).
func (s *Service) hold(ctx context.Context, f Fault) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return true
		case <-s.closing:
			t.Stop()
			return false
		}
	}
	if f.Block != nil {
		select {
		case <-f.Block:
		case <-ctx.Done():
			return true
		case <-s.closing:
			return false
		}
	}
	return true
}

func (s *Service) handleCompensate(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	q := r.URL.Query()
	reqID, bizID := q.Get("request_id"), q.Get("biz_id")
	if reqID == "" && bizID == "" {
		s.badRequest(w, "/compensate needs a request_id or biz_id query parameter")
		return
	}
	id, ok := s.compensate(reqID, bizID)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"status": "NOT_FOUND"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "COMPENSATED", "effect_id": id})
}

// compensate reverses the newest live effect of request reqID (when set)
// or of operation bizID, and returns its effect id; false when none is live.
func (s *Service) compensate(reqID, bizID string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.byBiz[bizID]
	if reqID != "" {
		idx = s.byReq[reqID]
	}
	for k := len(idx) - 1; k >= 0; k-- {
		c := &s.journal[idx[k]]
		if c.Failed != 0 || c.Compensated || (bizID != "" && c.BizID != bizID) {
			continue
		}
		c.Compensated, c.CompensatedAt = true, time.Now()
		return c.EffectID, true
	}
	return 0, false
}

func (s *Service) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	reqID := r.URL.Query().Get("request_id")
	if reqID == "" {
		s.badRequest(w, "/status needs a request_id query parameter")
		return
	}
	s.mu.Lock()
	idx := s.byReq[reqID]
	live := s.liveLocked(idx)
	applied := 0
	for _, i := range idx {
		if s.journal[i].Failed == 0 {
			applied++
		}
	}
	s.mu.Unlock()
	switch {
	case applied == 0:
		writeJSON(w, http.StatusNotFound, map[string]string{"status": "NOT_FOUND"})
	case live > 0:
		writeJSON(w, http.StatusOK, map[string]string{"status": "APPLIED"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "COMPENSATED"})
	}
}

// handleCount answers GET ?param=X with {"count": N}, N the live effects
// of operation X (as /effects?biz_id=X).
func (s *Service) handleCount(param string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodGet) {
			return
		}
		id := r.URL.Query().Get(param)
		if id == "" {
			s.badRequest(w, "%s needs a %s query parameter", r.URL.Path, param)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"count": s.Net(id)})
	}
}

// keyedHandler answers one POST: its status and body.
type keyedHandler func(r *http.Request, key string, body []byte) (int, map[string]any)

// once serves a POST at most once per Idempotency-Key header: the first
// request's answer is kept and given again to every later request with
// the same key and path, which applies nothing. A request without the
// header is refused (400).
func (s *Service) once(h keyedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodPost) {
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			s.badRequest(w, "%s needs an Idempotency-Key header", r.URL.Path)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			s.badRequest(w, "read %s body: %v", r.URL.Path, err)
			return
		}
		// One request per key at a time: a second one waits for the
		// first's answer instead of applying again.
		s.keyMu.Lock()
		defer s.keyMu.Unlock()
		s.mu.Lock()
		prev, seen := s.keyed[r.URL.Path+"\x00"+key]
		s.mu.Unlock()
		if seen {
			out := map[string]any{"replayed": true}
			for k, v := range prev.body {
				out[k] = v
			}
			writeJSON(w, prev.status, out)
			return
		}
		status, out := h(r, key, body)
		if status != http.StatusBadRequest {
			s.mu.Lock()
			s.keyed[r.URL.Path+"\x00"+key] = keyedAnswer{status: status, body: out}
			s.mu.Unlock()
		}
		writeJSON(w, status, out)
	}
}

// applyBy applies one effect of the operation named by ?param= (the
// request id is the Idempotency-Key, the payload the body when it is
// JSON).
func (s *Service) applyBy(param string) keyedHandler {
	return func(r *http.Request, key string, body []byte) (int, map[string]any) {
		id := r.URL.Query().Get(param)
		if id == "" {
			return http.StatusBadRequest, map[string]any{"status": "BAD_REQUEST", "error": fmt.Sprintf("%s: %s needs a %s query parameter", s.Name, r.URL.Path, param)}
		}
		req := callRequest{RequestID: key, BizID: id}
		if json.Valid(body) && len(bytes.TrimSpace(body)) > 0 {
			req.Payload = body
		}
		c, hooks := s.record(req, 0)
		for _, fn := range hooks {
			fn(c)
		}
		return http.StatusOK, map[string]any{"status": "APPLIED", "effect_id": c.EffectID}
	}
}

// releaseBy reverses the newest live effect of the operation named by
// ?param= (as /compensate?biz_id=).
func (s *Service) releaseBy(param string) keyedHandler {
	return func(r *http.Request, _ string, _ []byte) (int, map[string]any) {
		id := r.URL.Query().Get(param)
		if id == "" {
			return http.StatusBadRequest, map[string]any{"status": "BAD_REQUEST", "error": fmt.Sprintf("%s: %s needs a %s query parameter", s.Name, r.URL.Path, param)}
		}
		eid, ok := s.compensate("", id)
		if !ok {
			return http.StatusNotFound, map[string]any{"status": "NOT_FOUND"}
		}
		return http.StatusOK, map[string]any{"status": "COMPENSATED", "effect_id": eid}
	}
}

func (s *Service) handleEffects(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	bizID := r.URL.Query().Get("biz_id")
	if bizID == "" {
		s.badRequest(w, "/effects needs a biz_id query parameter")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"count": s.Net(bizID)})
}

func (s *Service) handleJournal(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	var out []Call
	if bizID := r.URL.Query().Get("biz_id"); bizID != "" {
		out = s.Calls(bizID)
	} else {
		s.mu.Lock()
		out = append([]Call{}, s.journal...)
		s.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"status": "BAD_REQUEST", "error": s.Name + ": " + fmt.Sprintf(format, args...)})
}

// allow answers 405 unless r uses method.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"status": "METHOD_NOT_ALLOWED", "error": r.Method + " " + r.URL.Path + ": use " + method})
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only plain maps and Calls are written
		status, b = http.StatusInternalServerError, []byte(`{"status":"ERROR"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// URLs are the base URLs of a Set's services.
type URLs struct {
	Notify, WMS, Logistics, Points string
}

// Set is the lab's four downstream services.
type Set struct {
	Notify, WMS, Logistics, Points *Service
}

// StartSet starts the four services ("notify", "wms", "logistics",
// "points"), each on its own port. On error the ones started are closed.
func StartSet() (*Set, error) {
	set := &Set{}
	for _, x := range []struct {
		name string
		dst  **Service
	}{
		{NameNotify, &set.Notify}, {NameWMS, &set.WMS}, {NameLogistics, &set.Logistics}, {NamePoints, &set.Points},
	} {
		s, err := Start(x.name)
		if err != nil {
			_ = set.Close()
			return nil, err
		}
		*x.dst = s
	}
	return set, nil
}

// Services returns the set's services in a fixed order (notify, wms,
// logistics, points), skipping any that is nil.
func (set *Set) Services() []*Service {
	var out []*Service
	for _, s := range []*Service{set.Notify, set.WMS, set.Logistics, set.Points} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Close closes every service of the set and returns their errors joined.
func (set *Set) Close() error {
	var errs []error
	for _, s := range set.Services() {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// URLs returns the services' base URLs.
func (set *Set) URLs() URLs {
	var u URLs
	if set.Notify != nil {
		u.Notify = set.Notify.URL
	}
	if set.WMS != nil {
		u.WMS = set.WMS.URL
	}
	if set.Logistics != nil {
		u.Logistics = set.Logistics.URL
	}
	if set.Points != nil {
		u.Points = set.Points.URL
	}
	return u
}
