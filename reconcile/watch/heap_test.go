package watch

import (
	"testing"
	"time"
)

func TestDeadlines(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	k := func(id string) Key { return Key{"p", id} }
	type op struct {
		set    string // Set this key at sec
		sec    int
		remove string
		due    int // Due(at(due)) when >= 0
		want   []string
	}
	for _, tc := range []struct {
		name string
		ops  []op
		left int
	}{
		{"earliest first", []op{{set: "c", sec: 3, due: -1}, {set: "a", sec: 1, due: -1}, {set: "b", sec: 2, due: -1}, {due: 2, want: []string{"a", "b"}}}, 1},
		{"moving a deadline", []op{{set: "a", sec: 1, due: -1}, {set: "b", sec: 2, due: -1}, {set: "a", sec: 5, due: -1}, {due: 2, want: []string{"b"}}, {due: 5, want: []string{"a"}}}, 0},
		{"removed never due", []op{{set: "a", sec: 1, due: -1}, {remove: "a", due: -1}, {due: 10, want: nil}}, 0},
		{"nothing due before", []op{{set: "a", sec: 5, due: -1}, {due: 4, want: nil}}, 1},
		{"due at exactly the deadline", []op{{set: "a", sec: 5, due: -1}, {due: 5, want: []string{"a"}}}, 0},
		{"ties by key", []op{{set: "b", sec: 1, due: -1}, {set: "a", sec: 1, due: -1}, {due: 1, want: []string{"a", "b"}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDeadlines()
			for i, o := range tc.ops {
				switch {
				case o.set != "":
					d.Set(k(o.set), at(o.sec))
				case o.remove != "":
					d.Remove(k(o.remove))
				}
				if o.due < 0 {
					continue
				}
				keys, _ := d.Due(at(o.due))
				var got []string
				for _, x := range keys {
					got = append(got, x.BizID)
				}
				if len(got) != len(o.want) {
					t.Fatalf("op %d: due %v, want %v", i, got, o.want)
				}
				for j := range got {
					if got[j] != o.want[j] {
						t.Fatalf("op %d: due %v, want %v", i, got, o.want)
					}
				}
			}
			if d.Len() != tc.left {
				t.Fatalf("%d left, want %d", d.Len(), tc.left)
			}
			if n, ok := d.Next(); ok != (tc.left > 0) || (ok && n.IsZero()) {
				t.Fatalf("Next = %v, %v", n, ok)
			}
		})
	}
}
