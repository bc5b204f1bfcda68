package spec

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestResolveEnv(t *testing.T) {
	env := map[string]string{"HOST": "10.0.0.1", "PORT": "8080", "EMPTY": "", "ON": "true", "F": "1.5", "HEX": "0x10"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct{ in, want, err string }{
		{`a: ${{HOST}}`, `{"a":"10.0.0.1"}`, ""},
		{`a: "${{PORT}}"`, `{"a":8080}`, ""},
		{`a: "${{ PORT }}"`, `{"a":8080}`, ""},
		{`a: "${{HOST}}:${{PORT}}"`, `{"a":"10.0.0.1:8080"}`, ""},
		{`a: ${{ON}}`, `{"a":true}`, ""},
		{`a: ${{F}}`, `{"a":1.5}`, ""},
		{`a: ${{HEX}}`, `{"a":16}`, ""},
		{`a: "x${{EMPTY}}"`, `{"a":"x"}`, ""},
		{`a: "${{EMPTY:=dflt}}"`, `{"a":""}`, ""},
		{`a: "${{NOPE:=dflt}}"`, `{"a":"dflt"}`, ""},
		{`a: "${{NOPE:= 42 }}"`, `{"a":42}`, ""},
		{`a: "${{NOPE}}"`, ``, "failed to handle configuration: can't find environment variable NOPE"},
		{`"${{HOST}}:80": 1`, `{"10.0.0.1:80":1}`, ""},
		{"a: '8080'", `{"a":"8080"}`, ""},
		{"# ${{NOPE}} in a comment\na: [\"${{PORT}}\"]", `{"a":[8080]}`, ""},
	}
	for _, tc := range tests {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tc.in), &doc); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		err := ResolveEnv(&doc, lookup)
		if diff := cmp.Diff(tc.err, errText(err)); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.in, diff)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrEnv) {
				t.Errorf("%s: error does not match ErrEnv", tc.in)
			}
			continue
		}
		b, err := YAMLToJSON(&doc)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, string(b)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestYAMLToJSON(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"b: 1\na: [x, 2.5, true, null, ~]\n", `{"b":1,"a":["x",2.5,true,null,null]}`, ""},
		{"n: 0x1F\no: 0o17\nbig: 18446744073709551615\nf: 1e3\n", `{"n":31,"o":15,"big":18446744073709551615,"f":1000}`, ""},
		{"s: '1'\nd: 2001-12-14\nq: \"a\\\"b\\u2028\"\n", `{"s":"1","d":"2001-12-14","q":"a\"b\u2028"}`, ""},
		{"base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n", `{"base":{"x":1,"y":2},"other":{"x":1,"y":3}}`, ""},
		{"a: &a [1]\nb: *a\n", `{"a":[1],"b":[1]}`, ""},
		{"", `null`, ""},
		{"a: .inf\n", ``, "yaml value .inf at line 1 is not a JSON number"},
		{"? [1]\n: 2\n", ``, "yaml mapping key at line 1 is not a scalar"},
	}
	for _, tc := range tests {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(tc.in), &doc); err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		b, err := YAMLToJSON(&doc)
		if diff := cmp.Diff(tc.err, errText(err)); diff != "" {
			t.Errorf("%q: error (-want +got):\n%s", tc.in, diff)
			continue
		}
		if diff := cmp.Diff(tc.want, string(b)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestYAMLAliasBomb(t *testing.T) {
	src := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 9; i++ {
		name := string(rune('b' + i))
		src += name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = name
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Skipf("the yaml parser refuses the document itself: %v", err)
	}
	start := time.Now()
	if _, err := YAMLToJSON(&doc); err == nil {
		t.Fatal("an alias bomb converted without error")
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("refusing the alias bomb took %v", d)
	}
}

func TestJSONToYAML(t *testing.T) {
	in := `{"z":1,"a":[1.5,"s",true,null,{"k":"${{X}}"}]}`
	doc, err := JSONToYAML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := ResolveEnv(doc, func(string) (string, bool) { return "7", true }); err != nil {
		t.Fatal(err)
	}
	b, err := YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"z":1,"a":[1.5,"s",true,null,{"k":7}]}`, string(b)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := JSONToYAML([]byte(`{"a":`)); !errors.Is(err, ErrSyntax) {
		t.Errorf("bad JSON: %v, want ErrSyntax", err)
	}
}
