//go:build failpoint

package repair

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/opctl-dev/opctl/sources"
)

// FailpointEnv names the failpoint a binary built with -tags failpoint
// stops at. TEST ONLY, and absent from every other build: set to
// "<point>:<action index>" it makes `opctl repair apply` kill itself
// (SIGKILL: no deferred function runs, no connection is closed cleanly) at
// that point of that action, to prove that applying the same plan again
// reaches exactly the state of an uninterrupted apply. The points:
// before-commit and after-commit (an action's first transaction),
// before-publish and after-publish (a republish's send), before-call and
// after-call (a compensate_remote's POST).
const FailpointEnv = "OPCTL_TEST_FAILPOINT"

// failpoints wraps the write path with the failpoint $OPCTL_TEST_FAILPOINT
// names, if any.
func failpoints(st sources.Store, pub Publisher, post sources.Poster) (sources.Store, Publisher, sources.Poster) {
	point := os.Getenv(FailpointEnv)
	if point == "" {
		return st, pub, post
	}
	f := &failpoint{at: point}
	st = &crashStore{Store: st, f: f}
	if pub != nil {
		pub = &crashPublisher{Publisher: pub, f: f}
	}
	if post != nil {
		post = &crashPoster{Poster: post, f: f}
	}
	return st, pub, post
}

// failpoint kills the process when an action reaches the named point.
type failpoint struct{ at string }

func (f *failpoint) reach(ctx context.Context, point string) {
	i := actionOf(ctx)
	if i == 0 || f.at != point+":"+strconv.Itoa(i) {
		return
	}
	fmt.Fprintf(os.Stderr, "opctl: TEST FAILPOINT %s reached: killing the process\n", f.at)
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {} // wait for the signal
}

type crashStore struct {
	sources.Store
	f *failpoint
}

func (s *crashStore) Do(ctx context.Context, fn func(sources.Tx) error) error {
	err := s.Store.Do(ctx, func(tx sources.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		s.f.reach(ctx, "before-commit")
		return nil
	})
	if err == nil {
		s.f.reach(ctx, "after-commit")
	}
	return err
}

type crashPublisher struct {
	Publisher
	f *failpoint
}

func (p *crashPublisher) Publish(ctx context.Context, topic string, partition int32, key, value []byte, headers map[string]string) (int32, int64, error) {
	p.f.reach(ctx, "before-publish")
	part, off, err := p.Publisher.Publish(ctx, topic, partition, key, value, headers)
	if err == nil {
		p.f.reach(ctx, "after-publish")
	}
	return part, off, err
}

type crashPoster struct {
	sources.Poster
	f *failpoint
}

func (p *crashPoster) Post(ctx context.Context, url string, body []byte, headers map[string]string) sources.PostResult {
	p.f.reach(ctx, "before-call")
	r := p.Poster.Post(ctx, url, body, headers)
	p.f.reach(ctx, "after-call")
	return r
}
