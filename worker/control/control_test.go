package control

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
)

func TestRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	r, err := spec.DecodeRoute([]byte(`{"id":1,"uri":"/hello","upstream":{"nodes":[{"host":"127.0.0.1","port":1980,"weight":1}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Routes: []*spec.Route{r}}
	go func() {
		_ = ca.Send(Config, EncodeSpec(s))
		_ = ca.Send(Drain, DrainMsg{TimeoutMS: 1500})
	}()
	typ, p, err := cb.Recv()
	if err != nil || typ != Config {
		t.Fatalf("recv: %v %v", typ, err)
	}
	got, err := DecodeSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Routes) != 1 || got.Routes[0].ID.String() != "1" || !got.Routes[0].ID.Num ||
		got.Routes[0].Upstream.Nodes.List[0].Port != 1980 || got.Routes[0].Upstream.Nodes.IsMap {
		t.Fatalf("decoded %+v", got.Routes[0])
	}
	typ, p, err = cb.Recv()
	if err != nil || typ != Drain || string(p) != `{"timeout_ms":1500}` {
		t.Fatalf("drain: %v %q %v", typ, p, err)
	}
}

func TestRecvRejects(t *testing.T) {
	a, b := net.Pipe()
	cb := New(b)
	go func() { _, _ = a.Write([]byte{0, 0, 0, 1, 99}) }()
	if _, _, err := cb.Recv(); err != ErrUnknownType {
		t.Fatalf("err = %v, want ErrUnknownType", err)
	}
	go func() { _, _ = a.Write([]byte{0xff, 0, 0, 0}) }()
	if _, _, err := cb.Recv(); err != ErrFrameTooLarge {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
}

// TestReports: the worker's frames reach the supervisor whole, in order.
func TestReports(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	type frame struct {
		T       Type
		Payload string
	}
	sent := []struct {
		t Type
		v any
	}{
		{Ready, ReadyMsg{ID: 1, PID: 42, Selector: "ebpf"}},
		{Applied, AppliedMsg{Routes: 3}},
		{Applied, AppliedMsg{Error: "spec: route 1: bad"}},
		{Stats, StatsMsg{Accepted: 5, Handled: 5, Requests: 9, Active: 2, Reading: 1, Writing: 1}},
		{Fatal, FatalMsg{Error: "listen tcp 127.0.0.1:1: bind: address already in use"}},
		{Drain, nil},
		{Rejoin, nil},
	}
	go func() {
		for _, f := range sent {
			_ = ca.Send(f.t, f.v)
		}
	}()
	var got []frame
	for range sent {
		typ, p, err := cb.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, frame{typ, string(p)})
	}
	want := []frame{
		{Ready, `{"id":1,"pid":42,"selector":"ebpf"}`},
		{Applied, `{"routes":3}`},
		{Applied, `{"routes":0,"error":"spec: route 1: bad"}`},
		{Stats, `{"accepted":5,"handled":5,"requests":9,"active":2,"reading":1,"writing":1,"waiting":0}`},
		{Fatal, `{"error":"listen tcp 127.0.0.1:1: bind: address already in use"}`},
		{Drain, ``},
		{Rejoin, ``},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}
