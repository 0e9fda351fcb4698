package config

import (
	"regexp"
	"testing"
)

// classes pairs each hand-written check with the regexp it replaces.
var classes = []struct {
	name string
	re   *regexp.Regexp
	fn   func(string) bool
}{
	{"ident", regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`), validIdentPart},
	{"env", regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), validEnvName},
	{"name", regexp.MustCompile(`^[A-Za-z0-9_.-]+$`), validName},
	{"topic", regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`), func(s string) bool { return validTopic(s) || s == "." || s == ".." }},
	{"version", regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$`), validVersion},
}

func TestCharClasses(t *testing.T) {
	inputs := []string{"", "a", "A_1", "_x", "1a", "a$b", "$a", "a-b", "a.b", ".", "..", "a b", "é", "a\x00", "3.5.0", "3.5.0.1", "3.5", "3.5.0.", ".3.5.0", "3..0",
		"3.5.0.1.2", "v3.5.0", "a\n", string(make([]byte, 250)), "settlement_anchored", "settlement-event", "x" + string(rune(0x300))}
	long := make([]byte, 250)
	for i := range long {
		long[i] = 'a'
	}
	inputs = append(inputs, string(long), string(long[:249]))
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			for _, in := range inputs {
				if got, want := c.fn(in), c.re.MatchString(in); got != want {
					t.Errorf("%q: %v, the regexp says %v", in, got, want)
				}
			}
		})
	}
	if validTopic(".") || validTopic("..") || !validTopic("a.b") {
		t.Error("topic . and .. are not legal, a.b is")
	}
}

// FuzzCharClasses: for any input, each check agrees with its regexp.
func FuzzCharClasses(f *testing.F) {
	for _, s := range []string{"a", "3.5.0", "_x$", "a-b.c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range classes {
			if got, want := c.fn(s), c.re.MatchString(s); got != want {
				t.Errorf("%s %q: %v, the regexp says %v", c.name, s, got, want)
			}
		}
	})
}
