package router

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		v, ok := luaNumber([]byte(s))
		got = append(got, res{v, ok})
	}
	want := []res{{10, true}, {10, true}, {-3.5, true}, {2, true}, {1000, true}, {0.01, true},
		{0.5, true}, {5, true}, {31, true}, {-16, true},
		{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {math.Inf(1), true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("luaNumber (-want +got):\n%s", diff)
	}
}
