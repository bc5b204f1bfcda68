package bpf

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr error
	}{
		{"hash", ModeHash, nil},
		{"", ModeHash, nil},
		{"cpu", ModeCPU, nil},
		{"least_conn", ModeLeastConn, nil},
		{"Hash", ModeHash, ErrBadMode},
		{"leastconn", ModeHash, ErrBadMode},
		{"roundrobin", ModeHash, ErrBadMode},
		{" cpu", ModeHash, ErrBadMode},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("ParseMode(%q) error = %v, want %v", tt.in, err, tt.wantErr)
		}
		if got != tt.want {
			t.Errorf("ParseMode(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if err == nil && tt.in != "" && got.String() != tt.in {
			t.Errorf("ParseMode(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestNames(t *testing.T) {
	got := map[string]string{
		"KindEBPF":       KindEBPF.String(),
		"KindCBPF":       KindCBPF.String(),
		"KindKernelHash": KindKernelHash.String(),
		"KindPlain":      KindPlain.String(),
		"Kind(9)":        Kind(9).String(),
		"ModeHash":       ModeHash.String(),
		"ModeCPU":        ModeCPU.String(),
		"ModeLeastConn":  ModeLeastConn.String(),
		"Mode(7)":        Mode(7).String(),
	}
	want := map[string]string{
		"KindEBPF":       "ebpf",
		"KindCBPF":       "cbpf",
		"KindKernelHash": "kernel_hash",
		"KindPlain":      "plain",
		"Kind(9)":        "kind(9)",
		"ModeHash":       "hash",
		"ModeCPU":        "cpu",
		"ModeLeastConn":  "least_conn",
		"Mode(7)":        "mode(7)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
