package sources

// Fuzz targets for the operation ids and URL templates of the operator's
// input (docs/where.md, docs/config.md "Templates"). The seeds and the
// files under testdata/fuzz/FuzzXxx run as ordinary tests with `go test`.
//
//	go test -run '^$' -fuzz '^FuzzValidateBizID$' -fuzztime 3m -parallel 1 ./sources/
//	go test -run '^$' -fuzz '^FuzzExpand$' -fuzztime 3m -parallel 1 ./sources/

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidateBizID: an accepted id is at most MaxBizID bytes of valid
// UTF-8 without a control character; a refused one is a *BadIDError (exit
// 2) saying why, in printable text.
func FuzzValidateBizID(f *testing.F) {
	for _, s := range []string{"PAY-20261201-0042", "", "O-S-1'; DROP TABLE x; --", "a\x00b", "é\u0085", "\xff", "\u202eevil", strings.Repeat("x", MaxBizID), strings.Repeat("é", MaxBizID/2+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateBizID(id)
		if err == nil {
			if id == "" || len(id) > MaxBizID || !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0 {
				t.Errorf("ValidateBizID(%q) accepted it", id)
			}
			return
		}
		var bad *BadIDError
		if !errors.As(err, &bad) || bad.ExitCode() != ExitUsage || bad.Msg == "" {
			t.Fatalf("ValidateBizID(%q) = %T %v; want a *BadIDError with a message", id, err, err)
		}
		if !utf8.ValidString(bad.Msg) || strings.IndexFunc(bad.Msg, unicode.IsControl) >= 0 {
			t.Errorf("ValidateBizID(%q): message with raw control characters: %q", id, bad.Msg)
		}
	})
}

// FuzzExpand: Expand never panics, leaves a template without placeholders
// as it is, and with escaping on, no value can change the scheme or the
// host of the URL the template names (a value only ever fills a path or
// query part).
func FuzzExpand(f *testing.F) {
	for _, s := range [][3]string{
		{"http://127.0.0.1:8081/notify/status?request_id={request_id}", "req-1", "PAY-1"},
		{"https://wms.internal/wms/locks?biz_id={biz_id}&r={request_id}", "../../x?y#z", "a b/c@d:e"},
		{"http://h/{biz_id}/x", "evil.example/", "%2F%40"},
		{"http://h:8080{biz_id}", "@evil", "//x"},
		{"{biz_id}://{request_id}", "javascript", "h"},
		{"http://{biz_id", "x}", "{"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, tmpl, requestID, bizID string) {
		vars := map[string]string{"request_id": requestID, "biz_id": bizID}
		got := Expand(tmpl, vars, true)
		_ = Expand(tmpl, vars, false)
		if !strings.Contains(tmpl, "{") && got != tmpl {
			t.Errorf("Expand(%q) = %q changed a template without placeholders", tmpl, got)
		}
		// The template's own scheme and host: the same whatever two
		// plain values fill it (else a placeholder is in the host, a
		// choice of the configuration).
		u1, err1 := url.Parse(Expand(tmpl, map[string]string{"request_id": "x", "biz_id": "x"}, true))
		u2, err2 := url.Parse(Expand(tmpl, map[string]string{"request_id": "y", "biz_id": "y"}, true))
		if err1 != nil || err2 != nil || u1.Scheme != u2.Scheme || u1.Host != u2.Host || u1.Host == "" {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("Expand(%q, %q, %q) = %q does not parse: %v", tmpl, requestID, bizID, got, err)
		}
		if u.Scheme != u1.Scheme || u.Host != u1.Host || u.User.String() != u1.User.String() {
			t.Errorf("Expand(%q, %q, %q) = %q: scheme %q host %q user %q, want %q %q %q",
				tmpl, requestID, bizID, got, u.Scheme, u.Host, u.User, u1.Scheme, u1.Host, u1.User)
		}
	})
}
