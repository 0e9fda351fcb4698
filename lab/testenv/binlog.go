package testenv

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinlogServer is a second MariaDB server that the tests start themselves,
// with its own data directory, a ROW binlog and a server id, on a free
// loopback port: the machine's own server (127.0.0.1:3306) is left as it is.
type BinlogServer struct {
	Dir  string
	Port int
	// RootDSN reaches it as root (no password), with RootDSN's parameters.
	RootDSN string
	cmd     *exec.Cmd
	log     *bytes.Buffer
	done    chan struct{}
}

// BinlogPath is the path of one of the server's binlog files (bin.000001):
// the tests that damage a file on purpose write it there.
func (s *BinlogServer) BinlogPath(name string) string { return filepath.Join(s.Dir, name) }

// BinlogOptions are extra settings of a BinlogServer.
type BinlogOptions struct {
	// ServerID is the server's server_id (default 7).
	ServerID int
	// Args are more mariadbd options (--max-binlog-size=100M).
	Args []string
	// NoBinlog starts the server without --log-bin (log_bin OFF).
	NoBinlog bool
}

// StartBinlogServer installs a data directory in a temporary directory
// (mariadb-install-db --no-defaults) and starts mariadbd on it with
// --log-bin and --binlog-format=ROW; it returns once the server answers
// (about 5 s). Stop it with Stop.
func StartBinlogServer(o BinlogOptions) (*BinlogServer, error) {
	for _, bin := range []string{"mariadb-install-db", "/usr/sbin/mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("testenv: %s not found (apt-get install mariadb-server): %v", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "opctl-binlog-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
		"--datadir="+data, "--user=root", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testenv: mariadb-install-db: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &BinlogServer{Dir: dir, Port: port,
		RootDSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/?parseTime=true&loc=UTC&multiStatements=true", port)}
	if err := s.start(o); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// start runs mariadbd on the server's data directory and port with o, and
// waits until it answers.
func (s *BinlogServer) start(o BinlogOptions) error {
	if o.ServerID == 0 {
		o.ServerID = 7
	}
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(s.Dir, "data"), "--user=root",
		"--port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.Dir, "s.sock"),
		"--server-id=" + strconv.Itoa(o.ServerID), "--pid-file=" + filepath.Join(s.Dir, "mariadbd.pid"),
		"--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2"}
	if !o.NoBinlog {
		args = append(args, "--log-bin="+filepath.Join(s.Dir, "bin"), "--binlog-format=ROW", "--sync-binlog=0")
	}
	args = append(args, o.Args...)
	s.log, s.done = &bytes.Buffer{}, make(chan struct{})
	s.cmd = exec.Command("/usr/sbin/mariadbd", args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start mariadbd: %v", err)
	}
	done := s.done
	go func() { _ = s.cmd.Wait(); close(done) }()
	if err := s.wait(30 * time.Second); err != nil {
		s.stop()
		return err
	}
	if !o.NoBinlog {
		// A triage's window starts a second before the operation: the
		// binlog must have begun before that, or it does not cover it.
		time.Sleep(2 * time.Second)
	}
	return nil
}

// Restart stops the server cleanly (its binlog ends with a stop event) and
// starts it again on the same data directory and port with o: with
// o.NoBinlog it runs without a binlog for a while, as a server whose
// log_bin was turned off.
func (s *BinlogServer) Restart(o BinlogOptions) error {
	s.stop()
	return s.start(o)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *BinlogServer) wait(limit time.Duration) error {
	db, err := sql.Open("mysql", s.RootDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("testenv: mariadbd exited while starting:\n%s", s.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: mariadbd on port %d did not answer in %s (%v):\n%s", s.Port, limit, err, s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pid is the server process's id (0 when it is not running): benchmarks
// read its CPU from /proc.
func (s *BinlogServer) Pid() int {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop stops the server (SIGTERM, then SIGKILL after 20 s) and removes its
// directory.
func (s *BinlogServer) Stop() {
	if s == nil {
		return
	}
	s.stop()
	os.RemoveAll(s.Dir)
}

// stop stops the server process and keeps its directory.
func (s *BinlogServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// MySQL is a fresh database on the server for this test, dropped when it
// ends (as testenv.MySQL on the machine's server).
func (s *BinlogServer) MySQL(t testing.TB) *DB {
	t.Helper()
	return MySQLAt(t, s.RootDSN)
}

// SharedBinlog is one BinlogServer for all the tests of a package: started
// by the first test that asks, stopped by TestMain after m.Run.
type SharedBinlog struct {
	Options BinlogOptions
	once    sync.Once
	srv     *BinlogServer
	err     error
}

// Get returns the shared server, starting it on first use. A server that
// cannot start fails the test in CI and skips it, loudly, elsewhere.
func (sb *SharedBinlog) Get(t testing.TB) *BinlogServer {
	t.Helper()
	sb.once.Do(func() { sb.srv, sb.err = StartBinlogServer(sb.Options) })
	if sb.err != nil {
		if InCI() {
			t.Fatalf("testenv: the binlog test server did not start in CI: %v", sb.err)
		}
		t.Skipf("SKIPPING: the binlog test server did not start: %v", sb.err)
	}
	return sb.srv
}

// Stop stops the server if it was started.
func (sb *SharedBinlog) Stop() { sb.srv.Stop() }

// Main runs a package's tests (a TestMain's m.Run), then stops the shared
// server: os.Exit(shared.Main(m)).
func (sb *SharedBinlog) Main(m *testing.M) int {
	code := m.Run()
	sb.Stop()
	return code
}

// BinlogServerFor starts a binlog server of the test's own (one that
// changes or damages the server itself), stopped when the test ends, after
// its databases are dropped. A server that cannot start fails the test in
// CI and skips it, loudly, elsewhere.
func BinlogServerFor(t testing.TB, o BinlogOptions) *BinlogServer {
	t.Helper()
	srv, err := StartBinlogServer(o)
	if err != nil {
		if InCI() {
			t.Fatalf("testenv: the binlog test server did not start in CI: %v", err)
		}
		t.Skipf("SKIPPING: the binlog test server did not start: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// PurgeBinlogs rotates the server's binlog (FLUSH BINARY LOGS) and purges
// every file before the new one, so that no earlier change can be read. A
// file is kept until the binlog checkpoint passed it: PURGE is retried.
func PurgeBinlogs(t testing.TB, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec("FLUSH BINARY LOGS"); err != nil {
		t.Fatalf("testenv: FLUSH BINARY LOGS: %v", err)
	}
	var cur string
	var rest [3]any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&cur, &rest[0], &rest[1], &rest[2]); err != nil {
		t.Fatalf("testenv: SHOW MASTER STATUS: %v", err)
	}
	for range 50 {
		if _, err := db.Exec("PURGE BINARY LOGS TO '" + cur + "'"); err != nil {
			t.Fatalf("testenv: PURGE BINARY LOGS: %v", err)
		}
		var n int
		rows, err := db.Query("SHOW BINARY LOGS")
		if err != nil {
			t.Fatalf("testenv: SHOW BINARY LOGS: %v", err)
		}
		for rows.Next() {
			n++
		}
		rows.Close()
		if n == 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("testenv: PURGE BINARY LOGS TO %s left older files", cur)
}
