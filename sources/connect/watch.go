package connect

import (
	"context"
	"hash/fnv"
	"slices"

	"github.com/opctl-dev/opctl/sources"
	binlogsrc "github.com/opctl-dev/opctl/sources/binlog"
	"github.com/opctl-dev/opctl/sources/config"
)

// WatchServer is one server whose pipelines `opctl watch` follows
// together (docs/watch.md#sources): the pipelines whose binlog DSN
// (mysql.binlog_dsn, else mysql.dsn, after pipelines[].mysql) is the same.
type WatchServer struct {
	// Label names the server in the position and on stderr (host:port, or
	// host:port/database when two DSNs share an address).
	Label     string
	Pipelines []*config.Pipeline
	// Follower reads the server's binlog with the watch's server id;
	// Schema is its DSN's database (the schema of unqualified tables).
	Follower *binlogsrc.Reader
	Schema   string
	// ServerID is the follower's replica server id.
	ServerID uint32
	// Err is why no follower could be made for the DSN (an address that
	// is not tcp): Probe returns it, so the server is polled.
	Err error
}

// WatchServers groups pipelines by binlog server and opens one follower
// per server with the server id WatchServerID(seed, mysql.server_id); a
// DSN the binlog cannot be read through (not tcp) is a WatchServer with
// Err set.
func (c *Clients) WatchServers(pipelines []*config.Pipeline, seed string) ([]*WatchServer, error) {
	var out []*WatchServer
	byDSN := map[string]*WatchServer{}
	for _, p := range pipelines {
		m := c.Config.MySQLFor(p)
		dsn := m.EffectiveBinlogDSN()
		if ws := byDSN[dsn]; ws != nil {
			ws.Pipelines = append(ws.Pipelines, p)
			continue
		}
		id := WatchServerID(seed, m.ServerID)
		ws := &WatchServer{Pipelines: []*config.Pipeline{p}, ServerID: id}
		r, err := binlogsrc.New(dsn, id, c.Timeout)
		if err != nil {
			ws.Label, ws.Err = config.RedactDSN(dsn), err
		} else {
			ws.Label, ws.Follower, ws.Schema = r.Addr(), r, r.Database()
		}
		byDSN[dsn] = ws
		out = append(out, ws)
	}
	for _, ws := range out {
		if ws.Follower != nil && slices.ContainsFunc(out, func(o *WatchServer) bool {
			return o != ws && o.Follower != nil && o.Follower.Addr() == ws.Follower.Addr()
		}) {
			ws.Label = ws.Follower.Addr() + "/" + ws.Schema
		}
	}
	return out, nil
}

// Probe says whether the server's binlog can be followed
// (binlogsrc.Reader.Probe) and returns its head.
func (ws *WatchServer) Probe(ctx context.Context) (sources.BinlogPosition, error) {
	if ws.Err != nil {
		return sources.BinlogPosition{}, ws.Err
	}
	return ws.Follower.Probe(ctx)
}

// WatchServerID is the replica server id of a watch's follower
// (docs/watch.md#server-id): stable for one watch (seed: the host name
// and the state file), so that its reconnection replaces its own earlier
// dump on the server instead of leaving it to time out, distinct between
// two watches (another host, or another state file), in [2^31, 2^32)
// (never a real replica's), and never mysql.server_id, which the evidence
// reader of the same process uses: two dumps with one id end each other.
func WatchServerID(seed string, evidence uint32) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("opctl-watch\x00" + seed))
	id := 1<<31 | h.Sum32()
	if id == evidence {
		id = 1<<31 | (id+1)&(1<<31-1)
	}
	return id
}
