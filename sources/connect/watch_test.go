package connect

import "testing"

// A watch's server id is stable for one seed, differs between seeds, lies
// in [2^31, 2^32), and is never the evidence reader's mysql.server_id
// (docs/watch.md#server-id).
func TestWatchServerID(t *testing.T) {
	a, b := WatchServerID("host-a\x00/var/lib/opctl/watch.json", 0), WatchServerID("host-b\x00/var/lib/opctl/watch.json", 0)
	if a != WatchServerID("host-a\x00/var/lib/opctl/watch.json", 0) {
		t.Errorf("not stable")
	}
	if a == b {
		t.Errorf("two hosts share %d", a)
	}
	for _, id := range []uint32{a, b} {
		if id < 1<<31 {
			t.Errorf("%d below 2^31", id)
		}
	}
	if got := WatchServerID("host-a\x00/var/lib/opctl/watch.json", a); got == a || got < 1<<31 {
		t.Errorf("with mysql.server_id %d: %d", a, got)
	}
	if got := WatchServerID("x", 1<<32-1); got < 1<<31 {
		t.Errorf("%d", got)
	}
}
