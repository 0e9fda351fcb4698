package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestNamedParams(t *testing.T) {
	cases := []struct {
		in, out string
		names   []string
		err     string
	}{
		{"INSERT INTO j (a, d) VALUES (:biz_id, -:delta)", "INSERT INTO j (a, d) VALUES (?, -?)", []string{"biz_id", "delta"}, ""},
		{"UPDATE b SET x = x - :delta WHERE id = :account_id", "UPDATE b SET x = x - ? WHERE id = ?", []string{"delta", "account_id"}, ""},
		{"SELECT ':no', \":no\", `:no` FROM t WHERE a = :yes", "SELECT ':no', \":no\", `:no` FROM t WHERE a = ?", []string{"yes"}, ""},
		{"SET @a := 1, b = 'it''s :x' -- :c\n, c = :d /* :e */", "SET @a := 1, b = 'it''s :x' -- :c\n, c = ? /* :e */", []string{"d"}, ""},
		{"SELECT CAST(x AS CHAR)::text, t.a:b", "SELECT CAST(x AS CHAR)::text, t.a:b", nil, ""},
		{"UPDATE t SET a = ?", "", nil, "? placeholder"},
		{"UPDATE t SET a = 'open", "", nil, "unterminated"},
	}
	for _, c := range cases {
		out, names, err := NamedParams(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || out != c.out || !reflect.DeepEqual(names, c.names) {
			t.Errorf("%q: %q %v %v, want %q %v", c.in, out, names, err, c.out, c.names)
		}
	}
}

func TestWithoutComments(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT 1 -- c", "SELECT 1  "},
		{"SELECT 1 # c\nFROM t", "SELECT 1  \nFROM t"},
		{"SELECT /* x */ 1", "SELECT   1"},
		{"SELECT '-- not a comment', `#x` FROM t", "SELECT '-- not a comment', `#x` FROM t"},
	} {
		got, err := WithoutComments(c.in)
		if err != nil || got != c.want {
			t.Errorf("WithoutComments(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := WithoutComments("SELECT 'open"); err == nil {
		t.Error("WithoutComments of an unterminated quote: no error")
	}
}
