package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Factory makes instances of one plugin.
type Factory struct {
	// Name is the APISIX wire name ("limit-count").
	Name string
	// Priority orders plugins within a phase, highest first (APISIX's
	// values: key-auth 2500, limit-count 1002, prometheus 500).
	Priority int
	// Build checks a route's configuration of the plugin and returns a
	// ready instance. It runs off the event loop; errors name the field.
	Build func(raw json.RawMessage) (Instance, error)
}

// Instance is one configured plugin; the interfaces of the phases it runs
// in are defined with the first plugins that need them.
type Instance any

// Sentinel errors.
var (
	ErrUnknown   = errors.New("plugins: unknown plugin")
	ErrDuplicate = errors.New("plugins: registered twice")
)

var (
	mu       sync.RWMutex
	registry = map[string]Factory{}
)

// Register adds a factory; it is meant for init functions. Registering a
// name twice panics, as it is a programming error.
func Register(f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[f.Name]; dup {
		panic(fmt.Errorf("%w: %s", ErrDuplicate, f.Name))
	}
	registry[f.Name] = f
}

// Lookup returns the factory of a plugin name.
func Lookup(name string) (Factory, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered plugins, by name.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Configured is one plugin of a route, built.
type Configured struct {
	Name     string
	Priority int
	Instance Instance
}

// Build builds a route's plugins (the "plugins" object) in execution order.
// An unknown name fails with APISIX's message, "unknown plugin [name]".
func Build(conf map[string]json.RawMessage) ([]Configured, error) {
	out := make([]Configured, 0, len(conf))
	for name, raw := range conf {
		f, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w [%s]", ErrUnknown, name)
		}
		inst, err := f.Build(raw)
		if err != nil {
			return nil, fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
		}
		out = append(out, Configured{Name: name, Priority: f.Priority, Instance: inst})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
