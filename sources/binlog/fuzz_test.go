package binlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/opctl-dev/opctl/sources"
)

// FuzzEvents feeds a binlog stream — events back to back, as a server
// sends them after its packet header — to the decoding the scan does
// (go-mysql's parser behind stream.parse, the checksums, the server's own
// rotate events) and to the window. Whatever the bytes, it never panics:
// a malformed event is an error naming its position. The corpus
// (testdata/fuzz/FuzzEvents) starts from real MariaDB streams: a double
// debit with its ledger rows, a statement-format debit, a minimal row
// image, a rotation (OPCTL_WRITE_CORPUS=1 go test -run TestWriteEventCorpus
// writes them again).
//
// With fixCRC each event's checksum is recomputed first, so that mutated
// events reach the decoders behind the CRC32 check.
func FuzzEvents(f *testing.F) {
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		s := &stream{r: &Reader{addr: "fuzz"}, parser: newParser(gomysql.MariaDBFlavor, nil), file: "bin.000001", pos: 4}
		req := sources.BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance",
			Key: "1001", From: time.Unix(0, 0), To: time.Unix(1<<32, 0), TxSchema: "pay", TxTable: "ledger_entry", TxColumn: "biz_order_id"}
		w := newWindow(req, 0, 1, 1)
		w.cols, w.txCols, w.crc = 3, 6, true
		w.evType = &s.typ
		s.parser.SetRowsEventDecodeFunc(w.decode)
		for len(data) >= replication.EventHeaderSize {
			n := int(binary.LittleEndian.Uint32(data[9:]))
			if n < replication.EventHeaderSize || n > len(data) {
				n = len(data)
			}
			file := s.file
			raw := data[:n]
			if fixCRC && n >= replication.EventHeaderSize+replication.BinlogChecksumLength {
				raw = append([]byte(nil), raw...)
				binary.LittleEndian.PutUint32(raw[n-4:], crc32.ChecksumIEEE(raw[:n-4]))
			}
			ev, err := s.parse(raw)
			data = data[n:]
			if err != nil {
				if !strings.Contains(err.Error(), "binlog of fuzz") {
					t.Fatalf("an error that does not name the server: %v", err)
				}
				continue
			}
			w.event(ev, file, s.start(ev))
		}
		for _, c := range w.changes {
			if c.ID() == "" {
				t.Fatal("a change without an identity")
			}
		}
	})
}

// FuzzStatement: the SQL text of statement-format events. The tokenizer
// and the questions asked of it never panic, and a statement that names the
// table plainly is always seen, whatever surrounds it.
func FuzzStatement(f *testing.F) {
	for _, q := range []string{
		"UPDATE account_balance SET balance = balance - 30 WHERE account_id = 'S-1'",
		"update `pay`.`account_balance` set balance=balance-1",
		"/*!40000 UPDATE account_balance SET balance = 1 */",
		"INSERT INTO other VALUES ('account_balance')",
		"WITH x AS (SELECT 1) UPDATE account_balance SET balance = 0",
		"-- account_balance\nINSERT INTO t VALUES (1)",
		"DELETE a FROM account_balance a JOIN `x``y` b",
		"\"account_balance\"", "`unterminated", "'unterminated", "/* unterminated",
	} {
		f.Add(q, "pay")
	}
	f.Fuzz(func(t *testing.T, q, schema string) {
		_ = isDML(q)
		_ = namesTable(q, schema, "pay", "account_balance", false)
		_ = namesTable(q, schema, "pay", "account_balance", true)
		for _, tok := range sqlTokens(q, -1) {
			if tok.kind == tokWord && tok.text == "" {
				t.Fatal("an empty word")
			}
		}
		// A debit named plainly after the text is always seen: the text
		// before it is closed off by a statement boundary the tokenizer
		// cannot swallow (a string, identifier or comment it opened is
		// closed by the new line and the terminators).
		if strings.ContainsAny(q, "'\"`#-/*\\") {
			return
		}
		if !namesTable(q+"; UPDATE account_balance SET balance = 0", "pay", "pay", "account_balance", false) {
			t.Fatalf("the debit after %q was not seen", q)
		}
	})
}

// TestWriteEventCorpus writes FuzzEvents' seed corpus from a real server's
// streams (only with OPCTL_WRITE_CORPUS=1).
func TestWriteEventCorpus(t *testing.T) {
	if os.Getenv("OPCTL_WRITE_CORPUS") == "" {
		t.Skip("SKIPPING: writes the fuzz corpus; set OPCTL_WRITE_CORPUS=1")
	}
	f := newFixture(t)
	f.db.Exec(t, "CREATE DATABASE IF NOT EXISTS pay")
	f.db.Exec(t, "CREATE TABLE IF NOT EXISTS pay.account_balance (account_id VARCHAR(64) PRIMARY KEY, balance DECIMAL(30,10) NOT NULL, updated_at DATETIME(3) NULL)")
	f.db.Exec(t, "CREATE TABLE IF NOT EXISTS pay.ledger_entry (id BIGINT AUTO_INCREMENT PRIMARY KEY, biz_order_id VARCHAR(64) NOT NULL, direction VARCHAR(8), amount DECIMAL(30,10), created_at DATETIME(3), x INT)")
	t.Cleanup(func() { f.db.Exec(t, "DROP DATABASE pay") })
	f.db.Exec(t, "FLUSH BINARY LOGS")
	f.db.Exec(t, "INSERT INTO pay.account_balance VALUES ('1001', 100, NULL)")
	for range 2 {
		f.db.Exec(t, "BEGIN; UPDATE pay.account_balance SET balance = balance - 30 WHERE account_id = '1001'; INSERT INTO pay.ledger_entry (biz_order_id) VALUES ('PAY-1'); COMMIT")
	}
	f.db.Exec(t, "SET SESSION binlog_format = 'STATEMENT'; UPDATE pay.account_balance SET balance = balance - 30 WHERE account_id = '1001'; SET SESSION binlog_format = 'ROW'")
	f.db.Exec(t, "SET SESSION binlog_row_image = 'MINIMAL'; UPDATE pay.account_balance SET balance = balance - 30 WHERE account_id = '1001'; SET SESSION binlog_row_image = 'FULL'")
	f.db.Exec(t, "FLUSH BINARY LOGS")
	ctx := context.Background()
	srv, err := f.reader.inspect(ctx, f.request("1001"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.reader.open(ctx, srv, srv.files[len(srv.files)-2].name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var stream []byte
	for {
		data, err := st.c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if data[0] == gomysql.EOF_HEADER && len(data) < 9 {
			break
		}
		if data[0] != gomysql.OK_HEADER {
			t.Fatalf("packet 0x%02x", data[0])
		}
		if _, err := st.parse(data[1:]); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		stream = append(stream, data[1:]...)
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzEvents")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		for _, fix := range []bool{false, true} {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", b, fix)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-crc-%v", name, fix)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("mariadb-stream", stream)
	// The same stream with one flipped byte in the middle.
	damaged := append([]byte(nil), stream...)
	damaged[len(damaged)/2] ^= 0x40
	write("mariadb-stream-damaged", damaged)
	write("mariadb-stream-cut", stream[:len(stream)*2/3])
}

// The seed corpus is a real stream, decoded whole: its two debits are
// found, and its statement-format debit makes the window unknown.
func TestEventCorpusDecodes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzEvents", "mariadb-stream-crc-false"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 3)
	var raw string
	if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"), "%q", &raw); err != nil {
		t.Fatal(err)
	}
	data := []byte(raw)
	s := &stream{r: &Reader{addr: "corpus"}, parser: newParser(gomysql.MariaDBFlavor, nil), file: "bin.000001", pos: 4}
	req := sources.BinlogRequest{Schema: "pay", Table: "account_balance", KeyColumn: "account_id", DeltaColumn: "balance",
		Key: "1001", From: time.Unix(0, 0), To: time.Unix(1<<32, 0), TxSchema: "pay", TxTable: "ledger_entry", TxColumn: "biz_order_id"}
	w := newWindow(req, 0, 1, 1)
	w.cols, w.txCols, w.crc = 3, 6, true
	s.parser.SetRowsEventDecodeFunc(w.decode)
	for len(data) > 0 {
		n := int(binary.LittleEndian.Uint32(data[9:]))
		file := s.file
		ev, err := s.parse(data[:n])
		if err != nil {
			t.Fatal(err)
		}
		data = data[n:]
		w.event(ev, file, s.start(ev))
	}
	if len(w.changes) != 2 || !strings.Contains(w.problem, "statement-format") {
		t.Fatalf("%d changes, problem %q", len(w.changes), w.problem)
	}
}
