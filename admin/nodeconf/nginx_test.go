package nodeconf

import (
	"errors"
	"testing"
	"time"
)

func TestParseNginxDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"60s", 60 * time.Second, false},
		{"60", 60 * time.Second, false},
		{"500ms", 500 * time.Millisecond, false},
		{"1m", time.Minute, false},
		{"1h 30m", 90 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"2d", 48 * time.Hour, false},
		{"1w", 7 * 24 * time.Hour, false},
		{"1M", 30 * 24 * time.Hour, false},
		{"1y", 365 * 24 * time.Hour, false},
		{"1m 1s 5ms", time.Minute + time.Second + 5*time.Millisecond, false},
		{"", 0, true},
		{"s", 0, true},
		{"1x", 0, true},
		{"1s 1m", 0, true},
		{"1s1s", 0, true},
		{"1.5s", 0, true},
		{"-1s", 0, true},
		{"99999999999999999y", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseNginxDuration(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseNginxDuration(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
		if err != nil && !errors.Is(err, ErrNodeConfig) {
			t.Errorf("ParseNginxDuration(%q) error does not match ErrNodeConfig", tc.in)
		}
	}
}

func TestParseNginxSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"0", 0, false},
		{"1024", 1024, false},
		{"1k", 1 << 10, false},
		{"8K", 8 << 10, false},
		{"1m", 1 << 20, false},
		{"2M", 2 << 20, false},
		{"1g", 1 << 30, false},
		{"", 0, true},
		{"m", 0, true},
		{"1.5m", 0, true},
		{"1t", 0, true},
		{"-1", 0, true},
		{"99999999999999999999g", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseNginxSize(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseNginxSize(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
