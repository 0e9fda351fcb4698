package cmd

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestBrokenAddressesAreConfigErrors: a DSN opctl cannot use (no database
// name, a parameter the driver would send to the server, an address
// outside tcp(...)) and a broker that is not host:port are configuration
// errors, exit 1, with the fix, from every command that connects (they all
// open their clients through sources/connect), never the password. Before,
// a DSN without a database gave INCOMPLETE with READ_ERROR on every step
// (exit 6), an unknown parameter failed every connection with the server's
// "Unknown system variable", a missing tcp() printed the driver's "default
// addr for network ... unknown", and a broker without a valid port made
// every verdict partial (exit 6).
func TestBrokenAddressesAreConfigErrors(t *testing.T) {
	f := newFixture(t, "settlement", "settlement-event")
	brokers := strings.Join(f.k.Brokers, ",")
	// CFG-1: STATE_BEHIND (the ledger row exists, the state says DEBIT_DONE), so a plan exists to apply.
	f.db.Exec(t, "INSERT INTO account_balance VALUES (1201, 990.00)")
	f.db.Exec(t, "INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at) VALUES ('CFG-1', 'DEBIT_DONE', 2, 'm-c1', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE)")
	f.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('CFG-1', 1201, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE)")
	f.db.Exec(t, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES ('CFG-1', 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE)")
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	ios, _, out, errOut := iostreams.Test()
	if code := Run(context.Background(), ios, []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", brokers,
		"repair", "plan", "CFG-1", "--reason", "test", "--out", plan}); code != ExitOK {
		t.Fatalf("repair plan: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(f.db.DSN, "root@tcp(") || !strings.Contains(f.db.DSN, "/"+f.db.Name+"?") {
		t.Fatalf("test DSN %q: cannot derive the broken DSNs from it", f.db.DSN)
	}
	withPassword := strings.Replace(f.db.DSN, "root@", "root:s3cret-pw@", 1)
	noDB := strings.Replace(f.db.DSN, "/"+f.db.Name+"?", "/?", 1)
	noTCP := strings.Replace(strings.Replace(withPassword, "tcp(", "", 1), ")/", "/", 1)
	for _, c := range []struct {
		name      string
		dsn       string
		brokers   string
		want      string
		mysqlOnly bool // the case breaks only the MySQL settings
	}{
		{"no database name", noDB, brokers, `names no database after the "/": write the consumers' database there, e.g. "root@tcp(`, true},
		{"no database name, with a password", strings.Replace(noDB, "root@", "root:s3cret-pw@", 1), brokers, `e.g. "root:***@tcp(`, true},
		{"unknown DSN parameter", f.db.DSN + "&sql_mode=ANSI", brokers, `has unknown parameter "sql_mode": the driver would send it to the server as a session variable; remove it (accepted: the driver's`, true},
		{"misspelt DSN parameter", f.db.DSN + "&parsetime=true", brokers, `has unknown parameter "parsetime" (did you mean "parseTime"?)`, true},
		{"a parameter the driver panics on", withPassword + "&strict=true", brokers, `has parameter "strict", which opctl refuses`, true},
		{"address outside tcp()", noTCP, brokers, `has its address outside tcp(...): write "root:***@tcp(127.0.0.1:3306)/` + f.db.Name + `?`, true},
		{"broker without a port", f.db.DSN, "no-port", `config: kafka broker "no-port" is not host:port`, false},
		{"broker port out of range", f.db.DSN, "127.0.0.1:99999", `config: kafka broker "127.0.0.1:99999" has port "99999"; want a number from 1 to 65535`, false},
	} {
		for _, args := range [][]string{
			{"where", "CFG-1"},
			{"repair", "plan", "CFG-1", "--reason", "test"},
			{"repair", "apply", plan, "--yes"},
			{"reconcile", "--check", "stuck"},
			{"schema", "check"},
			{"schema", "apply", "--audit"},
			{"audit", "--biz-id", "CFG-1"},
		} {
			if args[0] == "schema" && args[1] == "apply" && !c.mysqlOnly {
				continue // schema apply talks to MySQL only
			}
			t.Run(c.name+"/"+strings.Join(args[:2], " "), func(t *testing.T) {
				ios, _, out, errOut := iostreams.Test()
				code := Run(context.Background(), ios, append([]string{"--config", f.cfg, "--mysql-dsn", c.dsn, "--brokers", c.brokers, "--timeout", "5s"}, args...))
				if code != ExitError || !strings.Contains(errOut.String(), c.want) {
					t.Errorf("exit %d, want 1 with %q on stderr:\n%s\n%s", code, c.want, out, errOut)
				}
				if strings.Contains(out.String()+errOut.String(), "s3cret-pw") {
					t.Errorf("the password was printed:\n%s\n%s", out, errOut)
				}
			})
		}
	}
	var state string
	if err := f.db.SQL.QueryRow("SELECT CONCAT(status, '/', version) FROM biz_operation WHERE biz_id = 'CFG-1'").Scan(&state); err != nil || state != "DEBIT_DONE/2" {
		t.Errorf("CFG-1's state is %s (%v), want DEBIT_DONE/2: a broken configuration changed it", state, err)
	}

	// The binary exits 1, not 6, on a broker without a port.
	bin := buildOpctl(t, "")
	c := exec.Command(bin, "--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", "no-port", "where", "CFG-1")
	b, _ := c.CombinedOutput()
	if c.ProcessState.ExitCode() != ExitError || !strings.Contains(string(b), `kafka broker "no-port" is not host:port`) {
		t.Errorf("opctl where --brokers no-port: exit %d\n%s", c.ProcessState.ExitCode(), b)
	}
}
