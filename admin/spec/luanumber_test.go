package spec

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestLuaNumber(t *testing.T) {
	type res struct {
		V  float64
		OK bool
	}
	in := []string{"10", " 10\t", "-3.5", "+2", "1e3", "1E-2", ".5", "5.", "0x1F", "-0X10",
		"", " ", "abc", "1_000", "0x", "0xg", "1e", "1e+", ".", "-", "inf", "nan", "1.2.3", "12a", "1e999"}
	var got []res
	for _, s := range in {
		v, ok := LuaNumber([]byte(s))
		got = append(got, res{v, ok})
	}
	want := []res{{10, true}, {10, true}, {-3.5, true}, {2, true}, {1000, true}, {0.01, true},
		{0.5, true}, {5, true}, {31, true}, {-16, true},
		{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {math.Inf(1), true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LuaNumber (-want +got):\n%s", diff)
	}
}

// TestLuaNumberSmallInt: plain integers, read without ParseFloat up to 15
// digits, give ParseFloat's value, either side of that length and sign.
func TestLuaNumberSmallInt(t *testing.T) {
	for _, s := range []string{"0", "-0", "007", "200", "-42", "+9", "999999999999999", "-999999999999999",
		"1000000000000000", "9007199254740993", "12345678901234567890"} {
		v, ok := LuaNumber([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		if !ok || err != nil || v != want || math.Signbit(v) != math.Signbit(want) {
			t.Errorf("LuaNumber(%s) = %v, %v; want %v", s, v, ok, want)
		}
	}
}

func TestLuaNumberEnv(t *testing.T) {
	// ${{VAR}} values read as numbers keep their integer or float form.
	tests := []struct {
		s    string
		want string
	}{
		{"10", "!!int 10"}, {" -7 ", "!!int -7"}, {"+2", "!!int 2"}, {"0x1F", "!!int 31"}, {"-0X10", "!!int -16"},
		{"9007199254740993", "!!int 9007199254740993"}, {"1.5", "!!float 1.5"}, {"1e3", "!!float 1000"},
		{"5.", "!!float 5"}, {"1e999", "!!str 1e999"}, {"0x", "!!str 0x"}, {"1_000", "!!str 1_000"},
		{"true", "!!bool true"}, {"abc", "!!str abc"},
	}
	for _, tc := range tests {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "${{V}}"}
		if err := ResolveEnv(n, func(string) (string, bool) { return tc.s, true }); err != nil {
			t.Fatal(err)
		}
		if got := n.ShortTag() + " " + n.Value; got != tc.want {
			t.Errorf("%q: %s, want %s", tc.s, got, tc.want)
		}
	}
}
