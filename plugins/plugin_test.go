package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type fake struct{ conf string }

func init() {
	for _, f := range []struct {
		name string
		prio int
	}{{"test-auth", 2500}, {"test-limit", 1002}, {"test-b", 500}, {"test-a", 500}} {
		Register(Factory{Name: f.name, Priority: f.prio, Build: func(raw json.RawMessage) (Instance, error) {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			if _, bad := m["bad"]; bad {
				return nil, fmt.Errorf("property \"bad\" is not allowed")
			}
			return &fake{conf: string(raw)}, nil
		}})
	}
}

func TestBuildOrder(t *testing.T) {
	got, err := Build(map[string]json.RawMessage{
		"test-a": json.RawMessage(`{}`), "test-limit": json.RawMessage(`{"count":1}`),
		"test-b": json.RawMessage(`{}`), "test-auth": json.RawMessage(`{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	// Priority first, name breaks ties; the route's order never matters.
	if d := cmp.Diff([]string{"test-auth", "test-limit", "test-a", "test-b"}, names); d != "" {
		t.Fatalf("order (-want +got):\n%s", d)
	}
	if got[1].Instance.(*fake).conf != `{"count":1}` {
		t.Fatalf("instance built from the wrong config: %+v", got[1].Instance)
	}
}

func TestBuildErrors(t *testing.T) {
	_, err := Build(map[string]json.RawMessage{"no-such": json.RawMessage(`{}`)})
	if !errors.Is(err, ErrUnknown) || err.Error() != "plugins: unknown plugin [no-such]" {
		t.Fatalf("unknown plugin: %v", err)
	}
	_, err = Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"bad":1}`)})
	if err == nil || err.Error() != `failed to check the configuration of plugin test-a err: property "bad" is not allowed` {
		t.Fatalf("bad config: %v", err)
	}
	if got, err := Build(nil); err != nil || len(got) != 0 {
		t.Fatalf("no plugins: %v %v", got, err)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	Register(Factory{Name: "test-a"})
}

func TestNames(t *testing.T) {
	if d := cmp.Diff([]string{"test-a", "test-auth", "test-b", "test-limit"}, Names()); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
}
