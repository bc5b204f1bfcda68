package indexset

import (
	"slices"
	"testing"
)

type member struct {
	name string
	a, b int32 // positions in two sets
}

func TestSet(t *testing.T) {
	sa := New(func(m *member) *int32 { return &m.a })
	sb := New(func(m *member) *int32 { return &m.b })
	ms := []*member{{name: "x"}, {name: "y"}, {name: "z"}, {name: "w"}}
	for _, m := range ms {
		sa.Add(m)
	}
	sa.Add(ms[1]) // already there
	sb.Add(ms[2])
	if sa.Len() != 4 || sb.Len() != 1 {
		t.Fatalf("Len = %d, %d; want 4, 1", sa.Len(), sb.Len())
	}
	// ms[0..1] have position 0 and 1 in sa but were never added to sb.
	if sb.Has(ms[0]) || sb.Has(ms[1]) || !sb.Has(ms[2]) {
		t.Errorf("sb membership wrong")
	}
	if !sa.Remove(ms[1]) || sa.Remove(ms[1]) {
		t.Errorf("Remove: want true once, then false")
	}
	if sa.Has(ms[1]) || ms[1].a != -1 {
		t.Errorf("removed member still in: Has=%v pos=%d", sa.Has(ms[1]), ms[1].a)
	}
	// The last member moved into the hole and knows it.
	if sa.At(1) != ms[3] || ms[3].a != 1 {
		t.Errorf("At(1) = %s (pos %d), want w at 1", sa.At(1).name, ms[3].a)
	}
	var names []string
	for _, m := range sa.Items() {
		names = append(names, m.name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"w", "x", "z"}) {
		t.Errorf("Items = %v", names)
	}
	for sa.Len() > 0 {
		sa.Remove(sa.At(0))
	}
	if sa.Len() != 0 || sa.Has(ms[0]) {
		t.Errorf("set not empty")
	}
}

func TestSetAllocs(t *testing.T) {
	s := New(func(m *member) *int32 { return &m.a })
	ms := make([]*member, 64)
	for i := range ms {
		ms[i] = &member{a: -1}
		s.Add(ms[i])
	}
	for _, m := range ms {
		s.Remove(m)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, m := range ms {
			s.Add(m)
		}
		for i := len(ms) - 1; i >= 0; i -= 2 {
			s.Remove(ms[i])
		}
		for s.Len() > 0 {
			s.Remove(s.At(0))
		}
	})
	if allocs != 0 {
		t.Errorf("Add/Remove allocate %v times per run, want 0", allocs)
	}
}
