package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile/watch"
)

// The console's reads of a running `opctl watch` (docs/tui.md#watch):
// its /targets, bounded in time and size.
const (
	// DefaultWatchRefresh is how often the list reads /targets again
	// when --refresh is not given.
	DefaultWatchRefresh = 2 * time.Second
	// DefaultWatchTimeout bounds one read of /targets when --timeout is
	// not given.
	DefaultWatchTimeout = 5 * time.Second
	// maxTargetsBytes bounds the body of /targets read: a watch that
	// answers with more is refused, not held in memory.
	maxTargetsBytes = 64 << 20
)

// WatchURL checks the base URL of a running watch (`--watch URL`): http or
// https, a host, no query. It returns the URL of its /targets.
func WatchURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--watch %q: want the base URL of a running opctl watch, like http://127.0.0.1:9464 (its --listen)", base)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/targets") + "/targets"
	return u.String(), nil
}

// readTargets reads the flagged operations of a running watch from its
// /targets (targetsURL), within timeout, as the list's items; ages are
// from now.
func readTargets(ctx context.Context, client *http.Client, targetsURL string, timeout time.Duration, now time.Time) ([]Item, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, targetsURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no answer within %s", targetsURL, timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the title names the URL
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTargetsBytes+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: the answer did not end within %s", targetsURL, timeout)
		}
		return nil, fmt.Errorf("%s: reading the answer: %w", targetsURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		return nil, fmt.Errorf("%s: %s: %s", targetsURL, resp.Status, line)
	}
	if len(body) > maxTargetsBytes {
		return nil, fmt.Errorf("%s: the answer is larger than %d MiB", targetsURL, maxTargetsBytes>>20)
	}
	var evs []watch.Event
	if err := json.Unmarshal(body, &evs); err != nil {
		return nil, fmt.Errorf("%s: not the JSON array of an opctl watch's /targets: %w", targetsURL, err)
	}
	var c collector
	for _, e := range evs {
		c.addWatch(e, now)
	}
	return c.done(), nil
}

// itemOfEvent is the row of one flagged operation of a watch: its last
// flagged or changed line. Age is the time since that line; the watch
// reads no Kafka position or owner for its list (the detail does).
func itemOfEvent(e watch.Event, now time.Time) Item {
	it := Item{BizID: e.BizID, Pipeline: e.Pipeline, Verdict: inspect.Code(e.Verdict), Severity: inspect.Severity(e.Severity),
		Checks: "watch:" + e.Cause.Source, Age: -1, Partition: -1, Offset: -1, Summary: e.Summary}
	if !e.At.IsZero() {
		it.Age = max(0, now.Sub(e.At))
	}
	return it
}

// addWatch adds a watch's flagged operation (one row per operation).
func (c *collector) addWatch(e watch.Event, now time.Time) {
	k := e.Pipeline + "\x00" + e.BizID
	if c.index == nil {
		c.index = map[string]int{}
	}
	if _, ok := c.index[k]; ok {
		return
	}
	c.index[k] = len(c.items)
	c.items = append(c.items, itemOfEvent(e, now))
}
