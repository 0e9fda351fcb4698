package httpd

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

	"github.com/opctl-dev/opctl/reconcile/watch"
)

// MaxTargetsBytes bounds the answer of /targets ReadTargets reads: a
// watch (or something else at its address) that answers with more is
// refused, not held in memory.
const MaxTargetsBytes = 64 << 20

// TargetsURL checks the base URL of a running watch (`opctl tui --watch
// URL`: its --listen, http or https, a host, no query) and returns the URL
// of its /targets.
func TargetsURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--watch %q: want the base URL of a running opctl watch, like http://127.0.0.1:9464 (its --listen)", base)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/targets") + "/targets"
	return u.String(), nil
}

// ReadTargets reads the flagged operations of a running watch from its
// /targets (targetsURL), the whole read within timeout and its answer at
// most MaxTargetsBytes (docs/tui.md#the-console-on-a-watch). An error
// says what failed: no answer in time, an error status with the first
// line of its body, an answer that is not the watch's JSON array.
func ReadTargets(ctx context.Context, client *http.Client, targetsURL string, timeout time.Duration) ([]watch.Event, error) {
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
			return nil, fmt.Errorf("no answer within %s", timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the caller names the URL
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxTargetsBytes+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("the answer did not end within %s", timeout)
		}
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, line)
	}
	if len(body) > MaxTargetsBytes {
		return nil, fmt.Errorf("the answer is larger than %d MiB", MaxTargetsBytes>>20)
	}
	var evs []watch.Event
	if err := json.Unmarshal(body, &evs); err != nil {
		return nil, fmt.Errorf("not the JSON array of an opctl watch's /targets: %w", err)
	}
	return evs, nil
}

// ReadReady asks a running watch's /readyz (readyURL) whether it is
// ready, within timeout: "" when it is (200), else why not, as its 503
// says ("not ready: mysql does not answer (since ...)").
func ReadReady(ctx context.Context, client *http.Client, readyURL string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK {
		return "", nil
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if line == "" {
		line = resp.Status
	}
	return line, nil
}

// ReadyURL is the /readyz beside a watch's /targets URL.
func ReadyURL(targetsURL string) string {
	return strings.TrimSuffix(targetsURL, "/targets") + "/readyz"
}
