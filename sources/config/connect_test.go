package config

import (
	"strings"
	"testing"
)

func TestValidateKafka(t *testing.T) {
	tests := []struct {
		name     string
		edits    map[int]string
		env      map[string]string
		override []string // set Kafka.Brokers in code, as --brokers would
		want     []wantErr
		wantMsg  string // for errors without a file
	}{
		{name: "valid", edits: map[int]string{}},
		{name: "empty brokers names the unset variable", edits: map[int]string{4: `  brokers: ["${OPCTL_BROKERS}"]`},
			want: []wantErr{{4, `kafka.brokers is empty: $OPCTL_BROKERS is not set (list host:port addresses under kafka.brokers, or pass --brokers)`}}},
		{name: "no brokers key", edits: map[int]string{4: ``},
			want: []wantErr{{3, `kafka.brokers is empty (list host:port`}}},
		{name: "flag supplies brokers", edits: map[int]string{4: `  brokers: ["${OPCTL_BROKERS}"]`}, override: []string{"k:9092"}},
		{name: "broker without port, on its own line", edits: map[int]string{4: `  brokers:`, 5: `    - "kafka1"`},
			want: []wantErr{{5, `kafka broker "kafka1" is not host:port`}}},
		{name: "bad port from a comma list", edits: map[int]string{4: `  brokers: ["${B}"]`}, env: map[string]string{"B": "a:9092,b:99999"},
			want: []wantErr{{4, `kafka broker "b:99999" has port "99999"`}}},
		{name: "bad flag value has no file position", override: []string{":9092"},
			wantMsg: `config: kafka broker ":9092" has no host`},
		{name: "sasl password unset", edits: map[int]string{5: `  sasl: {mechanism: PLAIN, user: u, password: "${KAFKA_PASSWORD}"}`},
			want: []wantErr{{5, `kafka.sasl.password is empty: $KAFKA_PASSWORD is not set`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseWithEnv("t.yaml", []byte(edit(t, baseYAML, tt.edits)), envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if tt.override != nil {
				c.Kafka.Brokers = tt.override
			}
			err = c.ValidateKafka()
			switch {
			case tt.wantMsg != "":
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantMsg) {
					t.Errorf("error = %v, want prefix %s", err, tt.wantMsg)
				}
			case tt.want == nil:
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
			default:
				checkErrs(t, err, tt.want)
			}
		})
	}
}

func TestValidateMySQL(t *testing.T) {
	tests := []struct {
		name     string
		edits    map[int]string
		override string
		want     string
	}{
		{name: "valid", edits: map[int]string{}},
		{name: "unset variable", edits: map[int]string{2: `  dsn: "${OPCTL_MYSQL_DSN}"`},
			want: `config t.yaml:2: mysql.dsn is empty: $OPCTL_MYSQL_DSN is not set (set it, or pass --mysql-dsn)`},
		{name: "no mysql block", edits: map[int]string{1: ``, 2: ``},
			want: `config t.yaml: mysql.dsn is empty (set it, or pass --mysql-dsn)`},
		{name: "flag supplies the dsn", edits: map[int]string{2: `  dsn: "${OPCTL_MYSQL_DSN}"`}, override: "ro:pw@tcp(db:3306)/pay"},
		{name: "url form is rejected and redacted", edits: map[int]string{2: `  dsn: "mysql://app:hunter2@db:3306/pay"`},
			want: `config t.yaml:2: mysql.dsn "mysql://app:***@db:3306/pay" looks like a URL`},
		{name: "bad write dsn", edits: map[int]string{2: "  dsn: \"a:b@tcp(h)/db\"\n  write_dsn: \"w:secret@tcp(h)\""},
			want: `config t.yaml:3: mysql.write_dsn "w:***@tcp(h)" has no /dbname part`},
		{name: "unset write dsn falls back to dsn", edits: map[int]string{2: "  dsn: \"a:b@tcp(h)/db\"\n  write_dsn: \"${OPCTL_MYSQL_WRITE_DSN}\""}},
		{name: "bad flag value has no file position", override: "root:pw@tcp(h)",
			want: `config: mysql.dsn "root:***@tcp(h)" has no /dbname part`},
		{name: "no database name", edits: map[int]string{2: `  dsn: "app:hunter2@tcp(db:3306)/"`},
			want: `config t.yaml:2: mysql.dsn "app:***@tcp(db:3306)/" names no database after the "/": write the consumers' database there, e.g. "app:***@tcp(db:3306)/<database>"`},
		{name: "address without tcp()", edits: map[int]string{2: `  dsn: "app:hunter2@127.0.0.1:3306/pay"`},
			want: `config t.yaml:2: mysql.dsn "app:***@127.0.0.1:3306/pay" has its address outside tcp(...): write "app:***@tcp(127.0.0.1:3306)/pay"`},
		{name: "bad write dsn port", edits: map[int]string{2: "  dsn: \"a:b@tcp(h)/db\"\n  write_dsn: \"w:secret@tcp(h:99999)/db\""},
			want: `config t.yaml:3: mysql.write_dsn "w:***@tcp(h:99999)/db" has port "99999"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := edit(t, baseYAML, tt.edits)
			c, err := ParseWithEnv("t.yaml", []byte(src), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if tt.override != "" {
				c.MySQL.DSN = tt.override
			}
			err = c.ValidateMySQL()
			if tt.want == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant prefix %s", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret")) {
				t.Errorf("password printed: %v", err)
			}
		})
	}
}
