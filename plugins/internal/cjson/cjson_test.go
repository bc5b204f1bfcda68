package cjson

import "testing"

// TestAppendString: lua-cjson's escapes, '/' included; other bytes as
// they are.
func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       `"plain"`,
		`a/b "q" \ c`: `"a\/b \"q\" \\ c"`,
		"\n\r\t\b\f":  `"\n\r\t\b\f"`,
		"\x01\x7f":    `"\u0001\u007f"`,
		"é<>&":        `"é<>&"`,
	} {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
