package pylit

import (
	"errors"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{"None", nil},
		{" True ", true},
		{"False", false},
		{"32", int64(32)},
		{"-7", int64(-7)},
		{"0x1f", int64(31)},
		{"1_000", int64(1000)},
		{"1.5", 1.5},
		{"1e-3", 0.001},
		{"'detect'", "detect"},
		{`"it's"`, "it's"},
		{`'a\'b\\c\n\x41\u00e9\U0001F600\101'`, "a'b\\c\nA\u00e9\U0001F600A"},
		{`'ab' "cd"`, "abcd"},
		{`'\d'`, `\d`},
		{"[640, 640]", []any{int64(640), int64(640)}},
		{"(640,)", []any{int64(640)}},
		{"[]", []any{}},
		{"[17, 3, ]", []any{int64(17), int64(3)}},
		{"{0: 'person', 1: 'bicycle'}", &Dict{Keys: []any{int64(0), int64(1)}, Values: []any{"person", "bicycle"}}},
		{"{'batch': 1, 'half': False, 'nms': True, 'fraction': 1.0, 'data': None}", &Dict{
			Keys:   []any{"batch", "half", "nms", "fraction", "data"},
			Values: []any{int64(1), false, true, 1.0, nil}}},
		{"{'a': {'b': [1, (2, 3)]}}", &Dict{Keys: []any{"a"}, Values: []any{&Dict{Keys: []any{"b"}, Values: []any{[]any{int64(1), []any{int64(2), int64(3)}}}}}}},
		{"{0: 'caf\u00e9', 1: \"O'Neil\"}", &Dict{Keys: []any{int64(0), int64(1)}, Values: []any{"caf\u00e9", "O'Neil"}}},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	deep := ""
	for range MaxDepth + 1 {
		deep += "["
	}
	for _, in := range []string{
		"", "   ", "nope", "Nonesuch", "Truex", "[1, 2", "[1 2]", "{1: 2", "{1 2}", "{[1]: 2}", "{1: }",
		"'open", "'two\nlines'", "010", "1.2.3", "0xzz", "99999999999999999999999", "'\\x4'", "'\\ud800'",
		"1 2", "[1],", deep, "'\xff'", "os.system('x')", "__import__",
	} {
		v, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %#v, want an error", in, v)
		} else if !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v does not wrap ErrSyntax", in, err)
		}
	}
}

func TestDictGet(t *testing.T) {
	v, err := Parse("{'nms': True, 3: 'x'}")
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*Dict)
	if x, ok := d.Get("nms"); !ok || x != true {
		t.Errorf("nms = %v %v", x, ok)
	}
	if x, ok := d.Get(int64(3)); !ok || x != "x" {
		t.Errorf("3 = %v %v", x, ok)
	}
	if _, ok := d.Get("missing"); ok {
		t.Error("missing key found")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"{0: 'person', 1: 'bicycle'}", "[640, 640]", "{'batch': 1, 'nms': True, 'fraction': 1.0}",
		`'a\x41\u00e9'`, "((1,),)", "True", "-1e5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("%q: %v does not wrap ErrSyntax", s, err)
			}
			return
		}
		_ = v
	})
}
