package watch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// fakeFollower emits txs, then ends with err (nil: waits for ctx).
type fakeFollower struct {
	txs    []sources.BinlogTx
	err    error
	from   []sources.BinlogPosition
	tables []sources.FollowTable
}

func (f *fakeFollower) Head(context.Context) (sources.BinlogPosition, error) {
	return sources.BinlogPosition{File: "bin.000001", Pos: 4}, nil
}

func (f *fakeFollower) Follow(ctx context.Context, from sources.BinlogPosition, tables []sources.FollowTable, emit func(sources.BinlogTx) error) error {
	f.from, f.tables = append(f.from, from), tables
	for _, tx := range f.txs {
		if err := emit(tx); err != nil {
			return err
		}
	}
	if f.err != nil {
		return f.err
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestBinlogSource(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "st", Key: "biz_id"},
		Idempotency: &config.Idempotency{Table: "other.idem", BizID: "op"}}
	txs := []sources.BinlogTx{
		{Changes: []sources.RowChange{{Schema: "app", Table: "st", Kind: sources.ChangeUpdate, Values: map[string]string{"biz_id": "a"}},
			{Schema: "app", Table: "unrelated", Kind: sources.ChangeInsert, Values: map[string]string{"biz_id": "z"}}},
			End: sources.BinlogPosition{File: "bin.000001", Pos: 100}, CommittedAt: at},
		{Changes: []sources.RowChange{{Schema: "other", Table: "idem", Kind: sources.ChangeInsert, Values: map[string]string{"op": "b"}}},
			End: sources.BinlogPosition{File: "bin.000001", Pos: 200}, CommittedAt: at},
		{End: sources.BinlogPosition{File: "bin.000001", Pos: 300}, CommittedAt: at}, // a progress mark
	}
	for _, tc := range []struct {
		name    string
		txs     []sources.BinlogTx
		err     error
		want    []string
		wantPos string
		gone    bool
	}{
		{"rows to operations, position after the last", txs, nil, []string{"pay/a@st", "pay/b@other.idem"}, `{"file":"bin.000001","pos":300}`, false},
		{"purged", nil, &sources.PurgedError{Addr: "db:3306", From: sources.BinlogPosition{File: "bin.000001", Pos: 4}}, nil, "", true},
		{"rows unknown", []sources.BinlogTx{{Changes: []sources.RowChange{{Schema: "app", Table: "st", Statement: "UPDATE st SET x=1"}}}}, nil, nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFollower{txs: tc.txs, err: tc.err}
			s := &BinlogSource{Pipelines: []*config.Pipeline{p}, Follower: f, Schema: "app"}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			head, err := s.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []Change
			var pos string
			for i := 0; i < 100; i++ {
				var cs []Change
				cs, pos, err = s.Changes(ctx, head)
				got = append(got, cs...)
				if err != nil || (len(got) >= len(tc.want) && len(tc.want) > 0) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tc.gone {
				if !errors.Is(err, ErrPositionGone) {
					t.Fatalf("err %v, want ErrPositionGone", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, c := range got {
				keys = append(keys, c.Pipeline+"/"+c.BizID+"@"+c.Table)
				if c.CommittedAt == nil || !c.CommittedAt.Equal(at) || c.Position == "" {
					t.Errorf("change %+v", c)
				}
			}
			if len(keys) != len(tc.want) || keys[0] != tc.want[0] || keys[1] != tc.want[1] {
				t.Fatalf("changes %v, want %v", keys, tc.want)
			}
			// The progress mark may come in a later call.
			for i := 0; i < 100 && pos != tc.wantPos; i++ {
				_, pos, _ = s.Changes(ctx, pos)
				time.Sleep(2 * time.Millisecond)
			}
			if pos != tc.wantPos {
				t.Fatalf("position %s, want %s", pos, tc.wantPos)
			}
			if len(f.from) != 1 || f.from[0].Pos != 4 || len(f.tables) != 2 || f.tables[1].Schema != "other" {
				t.Fatalf("followed from %v tables %v", f.from, f.tables)
			}
		})
	}
}

// flakyFollower fails its first follow; the next ones deliver a progress
// mark once release is closed.
type flakyFollower struct {
	mu      sync.Mutex
	calls   int
	release chan struct{}
}

func (f *flakyFollower) Head(context.Context) (sources.BinlogPosition, error) {
	return sources.BinlogPosition{File: "bin.000001", Pos: 4}, nil
}

func (f *flakyFollower) Follow(ctx context.Context, from sources.BinlogPosition, _ []sources.FollowTable, emit func(sources.BinlogTx) error) error {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n == 1 {
		return errors.New("connection refused")
	}
	select {
	case <-f.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := emit(sources.BinlogTx{End: sources.BinlogPosition{File: "bin.000001", Pos: 50}}); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// A follow that failed is not regained when it restarts, only when the
// restarted follow delivers something: the source stays lost (an error)
// until then, instead of flapping between lost and regained while the
// server is down.
func TestBinlogSourceReconnect(t *testing.T) {
	f := &flakyFollower{release: make(chan struct{})}
	s := &BinlogSource{Follower: f, Schema: "app"}
	defer s.Close()
	ctx := context.Background()
	head, _ := s.Head(ctx)
	var err error
	pos := head
	for i := 0; i < 1000; i++ {
		if _, pos, err = s.Changes(ctx, pos); err != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("first follow: %v", err)
	}
	// Restarted: still lost while it has read nothing.
	if _, pos, err = s.Changes(ctx, pos); err == nil || !strings.Contains(err.Error(), "reconnecting after: connection refused") {
		t.Fatalf("restarted follow before it reads: %v", err)
	}
	close(f.release)
	for i := 0; i < 1000; i++ {
		if _, pos, err = s.Changes(ctx, pos); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil || pos != `{"file":"bin.000001","pos":50}` {
		t.Fatalf("after the restarted follow read: %v at %s", err, pos)
	}
}
