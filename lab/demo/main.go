// Command demo runs `opctl demo` on a machine with no MySQL at all: it starts
// an embedded MySQL-protocol server (github.com/dolthub/go-mysql-server, in
// memory) on a loopback port, then runs exactly the same demo code as
// `opctl demo --mysql-dsn` against it.
//
//	go run ./lab/demo              # every scenario, human output
//	go run ./lab/demo -o json      # flags are passed to `opctl demo`
//
// go-mysql-server lives only in this program: it is never linked into the
// opctl binary (its go-icu-regex dependency compiles a WebAssembly module at
// package init, +0.4–0.6 s and +40 MB on every run of any command).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/sirupsen/logrus"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/internal/iostreams"
)

func main() { os.Exit(run(os.Args[1:])) }

// run starts the embedded server and runs `opctl demo` on it.
func run(args []string) int {
	srv, dsn, err := startEmbedded()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab/demo: embedded MySQL-protocol server: %v\n", err)
		return cmd.ExitError
	}
	defer srv.Close()
	fmt.Fprintf(os.Stderr, "lab/demo: embedded MySQL-protocol server (go-mysql-server, in memory) on %s\n", srv.Listener.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return cmd.Run(ctx, iostreams.System(), append([]string{"demo", "--embedded", "--mysql-dsn", dsn}, args...))
}

// startEmbedded starts go-mysql-server on 127.0.0.1:0 and returns a DSN for
// it (root, no password; the lab creates its own database).
func startEmbedded() (*server.Server, string, error) {
	logrus.SetOutput(io.Discard) // go-mysql-server logs every connection and every failed prepare
	db := memory.NewDatabase("opctl")
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(db)
	engine := sqle.NewDefault(pro)
	serial := func(h mysql.Handler) (mysql.Handler, error) { return &serialHandler{Handler: h}, nil }
	srv, err := server.NewServerWithHandler(server.Config{Protocol: "tcp", Address: "127.0.0.1:0"}, engine, gmssql.NewContext,
		memory.NewSessionBuilder(pro), nil, serial)
	if err != nil {
		return nil, "", err
	}
	go func() { _ = srv.Start() }()
	return srv, "root@tcp(" + srv.Listener.Addr().String() + ")/", nil
}

// serialHandler runs one statement at a time across all connections. The
// in-memory tables of go-mysql-server are not safe for a read on one
// connection while another commits to the same table (the race detector
// shows an index scan reading rows that a commit is sorting): under load
// the demo's reads came back torn and redriven operations stalled. The
// demo's statements are small, so serving them one by one costs little.
type serialHandler struct {
	mysql.Handler
	mu sync.Mutex
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComQuery(ctx, c, query, callback)
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComMultiQuery(ctx, c, query, callback)
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComPrepare(ctx, c, query, prepare)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComStmtExecute(ctx, c, prepare, callback)
}
