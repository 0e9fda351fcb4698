package tui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/httpd"
	"github.com/opctl-dev/opctl/sources/config"
)

// watchTargets is what a running watch's /targets answers in these
// tests: three flags, one of whose values would drive the terminal.
func watchTargets() string {
	return `[{"event":"flagged","at":"2026-12-01T08:28:30.000Z","pipeline":"payments","biz_id":"PAY-20261201-0001","verdict":"DUPLICATE_EFFECT","severity":"action","summary":"the debit was applied twice","cause":{"source":"sweep","table":null,"position":null,"committed_at":null},"latency_ms":null},
{"event":"changed","at":"2026-12-01T08:29:50.000Z","pipeline":"orders","biz_id":"ORD-7\u001b[2J","verdict":"STRANDED","severity":"action","summary":"no one holds it\u001b]0;pwned\u0007","cause":{"source":"poll","table":"orders","position":"p","committed_at":"2026-12-01T08:29:49.500Z"},"latency_ms":500},
{"event":"flagged","at":"2026-12-01T08:20:00.000Z","pipeline":"settlement","biz_id":"SET-3","verdict":"WILL_REDELIVER","severity":"action","summary":"stuck","cause":{"source":"timer","table":null,"position":null,"committed_at":"2026-12-01T08:19:59.000Z"},"latency_ms":1000}]`
}

// roundTrip serves requests from a handler, or fails them: a watch that
// answers or one that is gone, at a fixed URL (the golden screens name it).
type roundTrip struct {
	mu   sync.Mutex
	h    http.Handler
	down bool
}

func (rt *roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	down := rt.down
	rt.mu.Unlock()
	if down {
		return nil, errors.New("dial tcp 127.0.0.1:9464: connect: connection refused")
	}
	rec := httptest.NewRecorder()
	rt.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time)     { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *clock) add(d time.Duration) { c.set(c.Now().Add(d)) }

// targetsOf reads the /targets of the watch at base as opctl tui --watch
// does (cmd/tui.go).
func targetsOf(c *http.Client, base string, timeout time.Duration) func(context.Context) ([]watch.Event, string, error) {
	return func(ctx context.Context) ([]watch.Event, string, error) {
		u, err := httpd.TargetsURL(base)
		if err != nil {
			return nil, "", err
		}
		evs, err := httpd.ReadTargets(ctx, c, u, timeout)
		if err != nil {
			return nil, "", err
		}
		notReady, err := httpd.ReadReady(ctx, c, httpd.ReadyURL(u), timeout)
		return evs, notReady, err
	}
}

func watchOptions(f *fake, rt *roundTrip, clk *clock) Options {
	o := f.options()
	o.Reconcile = func() (reconcile.Func, error) { return nil, errors.New("the console must not reconcile with --watch") }
	o.Watch, o.Now, o.Refresh = "http://127.0.0.1:9464", clk.Now, time.Hour
	o.Targets = targetsOf(&http.Client{Transport: rt}, o.Watch, time.Second)
	return o
}

// TestWatchGolden: `opctl tui --watch` lists a watch's /targets in the
// console's list (values shown safely), says in the status line why the
// watch is not ready (its /readyz), and when the watch stops answering
// keeps the list and says how old it is
// (testdata/TestWatchGolden/<size>/<screen>.golden; -update rewrites).
func TestWatchGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			rt := &roundTrip{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/readyz" {
					http.Error(w, "not ready: kafka does not answer (since 2026-12-01T08:29:10.000Z: EOF)", http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte(watchTargets()))
			})}
			clk := &clock{now: t0}
			m := New(context.Background(), watchOptions(newFake(t), rt, clk), NewStyles(false))
			tm := startProgram(t, m, size[0], size[1])
			waitFor(t, tm, "read 08:30:00")
			t.Run("list", func(t *testing.T) { golden.RequireEqual(t, []byte(screenOf(tm))) })
			rt.mu.Lock()
			rt.down = true
			rt.mu.Unlock()
			clk.add(42 * time.Second)
			sendKeys(tm, "r")
			waitFor(t, tm, "42s ago")
			t.Run("unreachable", func(t *testing.T) { golden.RequireEqual(t, []byte(screenOf(tm))) })
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
			if n := len(final.list.items); n != 3 {
				t.Fatalf("the list kept %d items, want the last 3", n)
			}
		})
	}
}

func screenOf(p *program) string {
	p.Send(pingMsg{})
	time.Sleep(20 * time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.screen
}

// TestWatchAgainstARealWatch reads the /targets of a real watch (a
// Watcher served by httpd on an httptest server): its flag is listed, its
// values sanitized; a watch that stops answering is said in the status
// line, the last list kept (httpd's TestReadTargetsFailures: a watch
// that hangs, answers an error or too much).
func TestWatchAgainstARealWatch(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	w := &watch.Watcher{Pipelines: []*config.Pipeline{p},
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "held by no one\x1b[31m"}}, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "PAY-1\x1b[2J", "pay", "STRANDED"
			return emit(r)
		}}
	m := httpd.NewMetrics(w.Targets, nil)
	w.Hooks = m.Hooks()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	for i := 0; !w.Ready() && i < 1000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	srv := httptest.NewServer(httpd.Handler(w, m))
	defer srv.Close()

	f := newFake(t)
	o := f.options()
	o.Watch = srv.URL
	o.Targets = targetsOf(http.DefaultClient, srv.URL, 2*time.Second)
	con := newModel(t, f, o, 100, 24)
	if len(con.list.items) != 1 || con.list.items[0].BizID != "PAY-1\x1b[2J" || con.list.items[0].Verdict != "STRANDED" {
		t.Fatalf("items %+v (err %q)", con.list.items, con.list.listErr)
	}
	screen := con.View().Content
	if strings.ContainsRune(screen, '\x1b') || !strings.Contains(screen, `"PAY-1\x1b[2J"`) {
		t.Fatalf("the id is not shown safely:\n%q", screen)
	}
	if !strings.Contains(screen, "watch "+srv.URL) {
		t.Fatalf("the title does not name the watch:\n%s", screen)
	}

	// The watch goes away: the list stays, the status line says so.
	srv.Close()
	con = step(t, con, con.reconcileCmd(con.list.gen)())
	if len(con.list.items) != 1 || !strings.Contains(con.list.listErr, "watch unreachable") || !strings.Contains(con.list.listErr, "ago): ") {
		t.Fatalf("after the watch stopped: %d items, status %q", len(con.list.items), con.list.listErr)
	}

}

// Enter on a watch's row opens the operation's detail, triaged through the
// console's own Triage (as without --watch), in the row's pipeline; r
// reads /targets again.
func TestWatchRowOpensTheDetail(t *testing.T) {
	var reads atomic.Int32
	rt := &roundTrip{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/targets" {
			reads.Add(1)
		}
		_, _ = w.Write([]byte(watchTargets()))
	})}
	f := newFake(t)
	m := newModel(t, f, watchOptions(f, rt, &clock{now: t0}), 100, 30)
	if len(m.list.items) != 3 {
		t.Fatalf("items %+v (%s)", m.list.items, m.list.listErr)
	}
	it := m.list.items[m.list.visible[m.list.cursor]]
	m = press(t, m, keyEnter)
	if m.screen != screenDetail || m.detail.d == nil || m.detail.d.bizID != it.BizID || m.detail.d.pipeline != it.Pipeline {
		t.Fatalf("after enter on %s/%s: screen %v, detail %+v", it.Pipeline, it.BizID, m.screen, m.detail.d)
	}
	if v := m.View().Content; !strings.Contains(v, it.BizID) || !strings.Contains(v, "STEPS") {
		t.Fatalf("the detail of %s:\n%s", it.BizID, v)
	}
	m = press(t, m, keyEsc)
	before := reads.Load()
	m = press(t, m, keyRunes("r"))
	if m.screen != screenList || reads.Load() != before+1 {
		t.Fatalf("r on the list: screen %v, %d reads of /targets after %d", m.screen, reads.Load(), before)
	}
}
