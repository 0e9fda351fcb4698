package sources

import "testing"

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://h:1/p?q=1":              "http://h:1/p?q=1",
		"http://u:pw@h:1/p?q=1":         "http://h:1/p?q=1",
		"https://u@h/p":                 "https://h/p",
		"http://u:p%zz@h/p":             "http://h/p", // does not parse: textual redaction
		"http://u:pw@h/p?next=a@b":      "http://h/p?next=a@b",
		"not a url":                     "not a url",
		"http://u:p w@h:1/x y?{biz_id}": "http://h:1/x y?{biz_id}",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
