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

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
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
	srv, err := server.NewServer(server.Config{Protocol: "tcp", Address: "127.0.0.1:0"}, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		return nil, "", err
	}
	go func() { _ = srv.Start() }()
	return srv, "root@tcp(" + srv.Listener.Addr().String() + ")/", nil
}
