package config

import (
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want, secret string }{
		{"", "", ""},
		{"u:p4ss@tcp(127.0.0.1:3306)/db", "u:***@tcp(127.0.0.1:3306)/db", "p4ss"},
		{"u:p@ss:w0rd@tcp(h:3306)/db?parseTime=true", "u:***@tcp(h:3306)/db?parseTime=true", "ss:w0rd"},
		{"u:pa/ss@tcp(h)/db", "u:***@tcp(h)/db", "pa/ss"},
		{"u:a://b@c@tcp(h)/db", "u:***@tcp(h)/db", "a://b@c"},
		{"u:x?y=z@tcp(h)/db?a=b", "u:***@tcp(h)/db?a=b", "x?y=z"},
		{"u:p@unix(/var/run/mysqld/mysqld.sock)/db", "u:***@unix(/var/run/mysqld/mysqld.sock)/db", ""},
		{"u:pw1@tcp(h)/db?x=a@b", "u:***@tcp(h)/db?x=a@b", "pw1"},
		{"u:pw1@tcp(h)", "u:***@tcp(h)", "pw1"},
		{"u:pw1@/db", "u:***@/db", "pw1"},
		{"mysql://u:pw1@h:3306/db", "mysql://u:***@h:3306/db", "pw1"},
		{"u@tcp(h)/db", "u@tcp(h)/db", ""},
		{"u:@tcp(h)/db", "u:@tcp(h)/db", ""},
		{"/db", "/db", ""},
		{"tcp(h:3306)/db", "tcp(h:3306)/db", ""},
	}
	for _, tt := range tests {
		got := RedactDSN(tt.in)
		if got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.secret != "" && strings.Contains(got, tt.secret) {
			t.Errorf("RedactDSN(%q) = %q leaks %q", tt.in, got, tt.secret)
		}
	}
}
