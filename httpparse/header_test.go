package httpparse

import "testing"

// TestSkipValue checks the word-at-a-time scan against the byte table for
// every byte value at every position of a word and in the tail.
func TestSkipValue(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 20; pos++ {
			buf := []byte("abcdefghij\t klmnopqrstuvwxyz")[:21]
			buf[pos] = byte(c)
			want := 0
			for want < len(buf) && charClass[buf[want]]&cValue != 0 {
				want++
			}
			for start := 0; start <= pos; start++ {
				if got := skipValue(buf, start); got != want {
					t.Fatalf("byte %#x at %d from %d: skipValue = %d, want %d", c, pos, start, got, want)
				}
			}
		}
	}
}

func TestCharClass(t *testing.T) {
	// Spot checks of the generated table against RFC 9110 §5.6.2 and §5.5.
	tests := []struct {
		c    byte
		want uint8
	}{
		{'a', cToken | cValue | cTarget | cHost | cHex},
		{'G', cToken | cValue | cTarget | cHost},
		{'7', cToken | cValue | cTarget | cHost | cDigit | cHex},
		{'-', cToken | cValue | cTarget | cHost},
		{'!', cToken | cValue | cTarget | cHost},
		{'|', cToken | cValue | cTarget},
		{':', cValue | cTarget},
		{'(', cValue | cTarget | cHost},
		{'"', cValue | cTarget},
		{'#', cToken | cValue},
		{'%', cToken | cValue},
		{'?', cValue},
		{'/', cValue | cTarget},
		{' ', cValue | cOWS},
		{'\t', cValue | cOWS},
		{0x7f, 0},
		{0x00, 0},
		{'\r', 0},
		{0x80, cValue | cTarget},
		{0xff, cValue | cTarget},
	}
	for _, tt := range tests {
		if got := charClass[tt.c]; got != tt.want {
			t.Errorf("charClass[%q] = %#x, want %#x", tt.c, got, tt.want)
		}
	}
	for c := 0; c < 256; c++ {
		if want := byte(c) | ('a'-'A')*b2u(c >= 'A' && c <= 'Z'); toLower[c] != want {
			t.Errorf("toLower[%#x] = %#x", c, toLower[c])
		}
	}
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}
