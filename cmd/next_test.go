package cmd

import (
	"bytes"
	"testing"
)

func TestNextFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      GlobalOptions
		line   string
		want   string
		hidden bool
	}{
		{name: "none", line: "opctl where PAY-1", want: "opctl where PAY-1"},
		{name: "config", g: GlobalOptions{ConfigPath: "prod.yaml"}, line: "opctl where PAY-1", want: "opctl --config prod.yaml where PAY-1"},
		{name: "config quoted", g: GlobalOptions{ConfigPath: "my conf/it's.yaml"}, line: "opctl audit PAY-1", want: `opctl --config 'my conf/it'\''s.yaml' audit PAY-1`},
		{name: "dsn without password", g: GlobalOptions{MySQLDSN: "ro@tcp(db:3306)/pay"}, line: "opctl where PAY-1", want: "opctl --mysql-dsn 'ro@tcp(db:3306)/pay' where PAY-1"},
		{name: "dsn with password", g: GlobalOptions{ConfigPath: "c.yaml", MySQLDSN: "app:s3cr@t@tcp(db:3306)/pay"}, line: "opctl where PAY-1", want: "opctl --config c.yaml where PAY-1", hidden: true},
		{name: "brokers", g: GlobalOptions{Brokers: []string{"k1:9092", "k2:9092"}}, line: "opctl repair plan PAY-1", want: "opctl --brokers k1:9092,k2:9092 repair plan PAY-1"},
		{name: "not an opctl command", g: GlobalOptions{ConfigPath: "c.yaml"}, line: "do the refund by hand", want: "do the refund by hand"},
		{name: "opctl-tui is not opctl", g: GlobalOptions{ConfigPath: "c.yaml"}, line: "opctl-tui", want: "opctl-tui"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.g.Next()
			if got := n.Apply(tc.line); got != tc.want {
				t.Errorf("Apply(%q) = %q, want %q", tc.line, got, tc.want)
			}
			if n.HiddenDSN != tc.hidden {
				t.Errorf("HiddenDSN %v, want %v", n.HiddenDSN, tc.hidden)
			}
			var b bytes.Buffer
			n.Note(&b)
			if (b.Len() > 0) != tc.hidden || bytes.Contains(b.Bytes(), []byte("s3cr")) {
				t.Errorf("note %q", b.String())
			}
		})
	}
}
