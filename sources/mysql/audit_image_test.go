package mysql

import (
	"reflect"
	"testing"
)

func TestAttestedOf(t *testing.T) {
	cases := []struct {
		img  string
		want map[string]string
	}{
		{`{"step":"notify","attested":{"PAY-1:notify:1":"applied","x":"compensated","*":"absent","r":"reversed"}}`,
			map[string]string{"PAY-1:notify:1": "applied", "x": "compensated", "*": "absent", "r": "reversed"}},
		{`{"step":"notify","attested":{"a":"maybe","b":1}}`, nil},
		{`{"step":"notify"}`, nil},
		{`{"attested":"applied"}`, nil},
		{`not json`, nil},
	}
	for _, c := range cases {
		if got := attestedOf([]byte(c.img)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.img, got, c.want)
		}
	}
}
