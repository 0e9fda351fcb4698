package kafka

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

// feedRun ends every search exactly as feeding its records one by one
// does: the same Location, counts, last offset, run and held matches,
// whether it ended and at which chunk, over random logs (clocks that run
// ahead, aborted records, matches inside and past the window) read in
// random chunks, for searches with and without All, read_committed or
// not, with limits that end them inside a run of records between matches.
func TestFeedRunIsFeed(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for seed := range uint64(400) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			n := 1 + rng.IntN(300)
			recs := make([]record, n)
			ts := at
			ahead := rng.IntN(3) == 0 // a log with clocks that run ahead
			for i := range recs {
				ts = ts.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
				stamp := ts
				if ahead && rng.IntN(20) == 0 {
					stamp = ts.Add(time.Hour) // a producer's clock ahead
				}
				f := fateCommitted
				if rng.IntN(15) == 0 {
					f = fateAborted
				}
				recs[i] = newRecord(&sources.Message{Offset: int64(100 + i), Timestamp: stamp,
					Key: []byte(fmt.Sprintf("K-%d", rng.IntN(5))), Headers: map[string]string{}}, f)
			}
			mk := func() *scan {
				r := rand.New(rand.NewPCG(seed, 9)) // the same scan twice
				s := &scan{r: &Reader{}, req: sources.LocateRequest{All: r.IntN(2) == 0}, iso: sarama.ReadUncommitted,
					limit: 1 + r.IntN(2*n), start: int64(100 + r.IntN(n)), last: -1,
					until:     at.Add(time.Duration(r.IntN(n*400)) * time.Millisecond),
					notBefore: at.Add(time.Duration(r.IntN(n*50)) * time.Millisecond)}
				if r.IntN(2) == 0 {
					s.iso, s.committedOnly = sarama.ReadCommitted, true
				}
				if r.IntN(2) == 0 {
					// A fresh operation's window, past the log's end:
					// every chunk quiet (the watch's usual search).
					s.until = at.Add(24 * time.Hour)
				}
				return s
			}
			matched := make([]bool, n)
			for i := range matched {
				matched[i] = rng.IntN(8) == 0
			}
			// The chunks, as fetches or the cache hand them.
			var cuts []int
			for i := 0; i < n; i += 1 + rng.IntN(64) {
				cuts = append(cuts, i)
			}
			cuts = append(cuts, n)

			ctx := context.Background()
			one, many := mk(), mk()
			oneDone, manyDone := -1, -1
			for k := 0; k+1 < len(cuts) && (oneDone < 0 || manyDone < 0); k++ {
				chunk := recs[cuts[k]:cuts[k+1]]
				var hits []int
				latest := int64(math.MinInt64)
				settled := true
				for i, rec := range chunk {
					if matched[cuts[k]+i] {
						hits = append(hits, i)
					}
					latest = max(latest, rec.stamp)
					settled = settled && rec.fate == fateCommitted
				}
				if oneDone < 0 {
					for i, rec := range chunk {
						if rec.Offset < one.start {
							continue
						}
						done, err := one.feed(ctx, nil, rec, matched[cuts[k]+i])
						if err != nil {
							t.Fatal(err)
						}
						if done {
							oneDone = k
							break
						}
					}
				}
				if manyDone < 0 {
					from := firstAt(chunk, many.start)
					done, err := many.feedRun(ctx, nil, chunk, from, hits, many.quiet(latest, settled))
					if err != nil {
						t.Fatal(err)
					}
					if done {
						manyDone = k
					}
				}
			}
			if oneDone != manyDone {
				t.Errorf("ended at chunk %d fed one by one, %d by feedRun", oneDone, manyDone)
			}
			if !reflect.DeepEqual(one, many) {
				t.Errorf("fed one by one: %+v\nby feedRun: %+v", *one, *many)
			}
		})
	}
}

// msCeil and msFloor bound a time by whole milliseconds, before 1970 too.
func TestMsBounds(t *testing.T) {
	for _, c := range []struct {
		t           time.Time
		ceil, floor int64
	}{
		{time.UnixMilli(1500), 1500, 1500},
		{time.Unix(1, 500_000_001), 1501, 1500},
		{time.Unix(-2, 999_999_999), -1000, -1001},
		{time.UnixMilli(-1500), -1500, -1500},
		{time.Time{}, time.Time{}.UnixMilli(), time.Time{}.UnixMilli()},
	} {
		if got := msCeil(c.t); got != c.ceil {
			t.Errorf("msCeil(%v) = %d, want %d", c.t, got, c.ceil)
		}
		if got := msFloor(c.t); got != c.floor {
			t.Errorf("msFloor(%v) = %d, want %d", c.t, got, c.floor)
		}
	}
}
