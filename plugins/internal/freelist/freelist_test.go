package freelist

import "testing"

func TestList(t *testing.T) {
	var l List[int]
	if l.Get() != nil {
		t.Fatal("Get on an empty list returned a value")
	}
	a, b := new(int), new(int)
	l.Put(a)
	l.Put(b)
	if l.Len() != 2 {
		t.Fatalf("Len %d, want 2", l.Len())
	}
	if l.Get() != b || l.Get() != a || l.Get() != nil {
		t.Fatal("Get does not hand back the values last in, first out")
	}
}
