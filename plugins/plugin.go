package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"coregate/admin/keyring"
	"coregate/admin/spec"
)

// Entry is one line of a table of plugins: an APISIX wire name
// ("limit-count") and its priority (1002). Within a phase, plugins run by
// priority, highest first, ties by name.
type Entry struct {
	Name     string
	Priority int
}

// Plugin is one plugin's implementation.
type Plugin interface {
	// Schema is the JSON Schema of the plugin's configuration (the value
	// of its key in a "plugins" object), as the plugin's `schema` in
	// apisix/plugins/<name>.lua: declarative, compiled once, when first
	// used (Registry), evaluated with APISIX's messages, and what
	// GET /apisix/admin/plugins/{name} shows.
	Schema() []byte
	// Check validates what the schema cannot say (relations between
	// fields, values that must parse), for a configuration that passed the
	// schema, its $env:// references resolved (see the package doc); nil
	// when there is nothing more. It is pure: no side effects,
	// nothing kept, safe for concurrent use; with the schema it is what the
	// Admin API calls to answer 400, so its error names the field and the
	// value at fault.
	Check(raw json.RawMessage) error
	// Build makes the runtime instance of a configuration that passed
	// Check, its references resolved as Check saw them. It runs off the
	// event loop, once per configuration snapshot,
	// and may allocate; env gives the process's shared counters and metric
	// slots. The instance implements the phase interfaces it runs in
	// (RewritePhase, AccessPhase, …) and is shared by every request of
	// the routes it was built for, on one event loop.
	Build(raw json.RawMessage, env Env) (Instance, error)
}

// Instance is one configured plugin, as Build made it; the phases it runs
// in are the phase interfaces it implements.
type Instance any

// ConsumerSchemaPlugin is implemented by a plugin whose configuration on a
// consumer or a credential object differs from its configuration on a
// route (APISIX's consumer_schema, key-auth's {"key"}): such a
// configuration is checked against ConsumerSchema alone, as APISIX's
// check_schema(conf, TYPE_CONSUMER) does. Other plugins' configurations
// on consumers are checked as on routes.
type ConsumerSchemaPlugin interface {
	// ConsumerSchema is the JSON Schema of the plugin's configuration on
	// a consumer, compiled with the plugin's other schemas.
	ConsumerSchema() []byte
}

// ConsumerCheckPlugin is a ConsumerSchemaPlugin whose consumer
// configurations need more than their schema says, as APISIX's
// check_schema(conf, TYPE_CONSUMER) does beyond the schema (jwt-auth's
// secret required for an HS algorithm).
type ConsumerCheckPlugin interface {
	ConsumerSchemaPlugin
	// CheckConsumer validates a consumer's or a credential's
	// configuration that passed ConsumerSchema, its references resolved;
	// pure and safe for concurrent use, as Check. Its error names the
	// field at fault.
	CheckConsumer(raw json.RawMessage) error
}

// GroupPlugin is implemented by a plugin whose configurations naming the
// same "group" share one state (limit-count's counter): the Admin API
// refuses a member configured unlike the group's others, APISIX's "group
// conf mismatched".
type GroupPlugin interface {
	// GroupConf returns the group a configuration (which passed Check)
	// names, "" when none, and the configuration as APISIX compares the
	// members: with the schema's defaults filled in, in one canonical
	// form, so that two members are alike when these bytes are equal.
	GroupConf(raw json.RawMessage) (group string, canon []byte, err error)
}

// Sentinel errors.
var (
	ErrUnknown    = errors.New("unknown plugin") // APISIX's text, which clients match on
	ErrDuplicate  = errors.New("plugins: registered twice")
	ErrNotInTable = errors.New("plugins: not in the table of plugins")
)

// Registry holds the implementations of the plugins of one table.
// Registration happens in init functions; afterwards a Registry is only
// read, and all its methods are safe for concurrent use.
//
// A plugin's schemas are compiled when they are first used, not when it is
// registered: every process of the gateway registers every plugin, and a
// worker, which checks only the plugins its routes configure, would
// otherwise compile them all at each start (most of its start's CPU time).
// Compile compiles them all at once, for the process that checks
// configurations, so that a schema that does not compile stops it at
// start.
type Registry struct {
	mu sync.RWMutex
	// table is the entries by name, each made once: a Configured points
	// at its plugin's (Configured.Entry).
	table map[string]*Entry
	impl  map[string]Plugin
	// schemas holds each registered plugin's schemas, compiled on first
	// use.
	schemas map[string]*schemas
	// fp is Fingerprint's, once fpSet (a Register after it unsets it).
	fp    [32]byte
	fpSet bool
	// memo are the configurations without references that passed
	// (checked.go).
	memo memo
	// keyring decrypts the configurations' encrypt_fields (encrypt.go);
	// nil for none.
	keyring atomic.Pointer[keyring.Keyring]
	// secrets resolves $secret:// references (envref.go); nil for none.
	secrets atomic.Pointer[secretSource]
}

// schemas are one plugin's compiled schemas: of its configuration, on a
// consumer (a ConsumerSchemaPlugin's; nil for others) and of its metadata
// (a MetadataSchemaPlugin's, or anyObject).
type schemas struct {
	once                     sync.Once
	conf, consumer, metadata *spec.Schema
	err                      error
	// secrets and consumerSecrets are the encrypt_fields of the schema
	// and of the consumer schema (nil for a plugin without one), read
	// apart from the compilation, which a worker building a checked
	// configuration does not need (encrypt.go).
	secretsOnce              sync.Once
	secrets, consumerSecrets []string
	hasConsumer              bool
}

// NewRegistry makes an empty registry whose plugins must be named in table.
func NewRegistry(table []Entry) *Registry {
	r := &Registry{table: make(map[string]*Entry, len(table)), impl: map[string]Plugin{}, schemas: map[string]*schemas{}}
	for _, e := range table {
		r.table[e.Name] = &e
	}
	return r
}

// Default is the registry of Table, the one the gateway serves from.
var Default = NewRegistry(Table)

// Register adds the implementation of the plugin name of Table to Default;
// it is meant for init functions.
func Register(name string, p Plugin) { Default.Register(name, p) }

// Register adds the implementation of the plugin name; its schemas are
// compiled when first used (or by Compile). A name not in the registry's
// table, or registered twice, panics: both are programming errors.
func (r *Registry) Register(name string, p Plugin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.table[name]; !ok {
		panic(fmt.Errorf("%w: %s", ErrNotInTable, name))
	}
	if _, dup := r.impl[name]; dup {
		panic(fmt.Errorf("%w: %s", ErrDuplicate, name))
	}
	r.impl[name] = p
	r.schemas[name] = &schemas{}
	r.fpSet = false
}

// compiled returns the compiled schemas of the registered plugin name,
// compiling them on first use; false if name is not registered.
func (r *Registry) compiled(name string) (*schemas, bool) {
	r.mu.RLock()
	p, ok := r.impl[name]
	sc := r.schemas[name]
	r.mu.RUnlock()
	if !ok {
		return nil, false
	}
	sc.once.Do(func() { sc.err = sc.compile(name, p) })
	return sc, true
}

func (sc *schemas) compile(name string, p Plugin) error {
	var err error
	if sc.conf, err = spec.CompileSchema(name, p.Schema()); err != nil {
		return fmt.Errorf("plugins: %s: schema: %w", name, err)
	}
	if cp, ok := p.(ConsumerSchemaPlugin); ok {
		if sc.consumer, err = spec.CompileSchema(name+".consumer", cp.ConsumerSchema()); err != nil {
			return fmt.Errorf("plugins: %s: consumer schema: %w", name, err)
		}
	}
	msch := anyObject
	if mp, ok := p.(MetadataSchemaPlugin); ok {
		msch = mp.MetadataSchema()
	}
	if sc.metadata, err = spec.CompileSchema(name+".metadata", msch); err != nil {
		return fmt.Errorf("plugins: %s: metadata schema: %w", name, err)
	}
	return nil
}

// Compile compiles the schemas of every registered plugin that were not
// compiled yet: the first error, which names the plugin.
func (r *Registry) Compile() error {
	for _, name := range r.Names() {
		if sc, _ := r.compiled(name); sc.err != nil {
			return sc.err
		}
	}
	return nil
}

// ConsumerSchema returns the consumer schema of a registered
// ConsumerSchemaPlugin as one self-contained document; false for any other
// plugin (APISIX answers "not found schema" for those), and for one whose
// schemas do not compile.
func (r *Registry) ConsumerSchema(name string) ([]byte, bool) {
	sc, ok := r.compiled(name)
	if !ok || sc.err != nil || sc.consumer == nil {
		return nil, false
	}
	return sc.consumer.JSON(), true
}

// Schema returns the JSON Schema of a registered plugin's configuration as
// one self-contained document; false for a plugin that is not registered
// or whose schemas do not compile.
func (r *Registry) Schema(name string) ([]byte, bool) {
	sc, ok := r.compiled(name)
	if !ok || sc.err != nil {
		return nil, false
	}
	return sc.conf.JSON(), true
}

// check resolves raw's references (resolveRefs), then runs the schema and
// the plugin's own Check on what they resolved to: the configuration to
// build, and the references it held. A configuration without references
// that this registry passed before, or that one of its fingerprint did
// (trusted: see checked.go), is passed as it is.
func (r *Registry) check(name string, p Plugin, raw json.RawMessage, trusted bool) (json.RawMessage, []ref, error) {
	raw = r.decrypt(name, p, raw, false)
	var key [32]byte
	if !mayHoldRefs(raw) {
		if trusted {
			return raw, nil, nil
		}
		if key = passKey(false, name, raw); r.memo.has(key) {
			return raw, nil, nil
		}
	}
	sc, _ := r.compiled(name)
	if sc.err != nil {
		return nil, nil, checkError(name, sc.err)
	}
	resolved, refs, err := resolveRefs(raw, r.secretSource())
	if err != nil {
		return nil, nil, checkError(name, err)
	}
	if err := sc.conf.Validate(resolved); err != nil {
		return nil, nil, checkError(name, redactRefs(err, refs))
	}
	if err := p.Check(resolved); err != nil {
		return nil, nil, checkError(name, redactRefs(err, refs))
	}
	if key != ([32]byte{}) {
		r.memo.add(key)
	}
	return resolved, refs, nil
}

// Lookup returns the table entry and the implementation of a registered
// plugin.
func (r *Registry) Lookup(name string) (Entry, Plugin, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.impl[name]
	if !ok {
		return Entry{}, nil, false
	}
	return *r.table[name], p, true
}

// lookupEntry is Lookup with the registry's own entry, which a Configured
// points at.
func (r *Registry) lookupEntry(name string) (*Entry, Plugin, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.impl[name]
	if !ok {
		return nil, nil, false
	}
	return r.table[name], p, true
}

// Names lists the registered plugins, by name.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.impl))
	for n := range r.impl {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Check checks one plugin's configuration with APISIX's messages:
// "unknown plugin [name]" (wrapping ErrUnknown) for a plugin that is not
// registered, "failed to check the configuration of plugin <name> err:
// <why>" for a configuration it refuses, as its references resolve in
// this process (one that does not resolve matches ErrReference).
func (r *Registry) Check(name string, raw json.RawMessage) error {
	_, p, ok := r.Lookup(name)
	if !ok {
		return fmt.Errorf("%w [%s]", ErrUnknown, name)
	}
	_, _, err := r.check(name, p, raw, false)
	return err
}

// CheckConsumer checks one plugin's configuration on a consumer or a
// credential object, with Check's messages: against the plugin's consumer
// schema (and its CheckConsumer, a ConsumerCheckPlugin's) when it is a
// ConsumerSchemaPlugin, as Check otherwise.
func (r *Registry) CheckConsumer(name string, raw json.RawMessage) error {
	_, p, ok := r.Lookup(name)
	if !ok {
		return fmt.Errorf("%w [%s]", ErrUnknown, name)
	}
	_, _, err := r.checkConsumer(name, p, raw, false)
	return err
}

// checkConsumer is CheckConsumer of a registered plugin, as check: the
// configuration with its references resolved, and the references.
func (r *Registry) checkConsumer(name string, p Plugin, raw json.RawMessage, trusted bool) (json.RawMessage, []ref, error) {
	raw = r.decrypt(name, p, raw, true)
	var key [32]byte
	if !mayHoldRefs(raw) {
		if trusted {
			return raw, nil, nil
		}
		if key = passKey(true, name, raw); r.memo.has(key) {
			return raw, nil, nil
		}
	}
	sc, _ := r.compiled(name)
	if sc.err != nil {
		return nil, nil, checkError(name, sc.err)
	}
	if sc.consumer == nil {
		return r.check(name, p, raw, false)
	}
	resolved, refs, err := resolveRefs(raw, r.secretSource())
	if err != nil {
		return nil, nil, checkError(name, err)
	}
	if err := sc.consumer.Validate(resolved); err != nil {
		return nil, nil, checkError(name, redactRefs(err, refs))
	}
	if cc, ok := p.(ConsumerCheckPlugin); ok {
		if err := cc.CheckConsumer(resolved); err != nil {
			return nil, nil, checkError(name, redactRefs(err, refs))
		}
	}
	if key != ([32]byte{}) {
		r.memo.add(key)
	}
	return resolved, refs, nil
}

// CheckAll checks an object's plugins, in name order so that the same
// object always gives the same error: with CheckConsumer for a consumer's
// or a credential's (consumer set), with Check otherwise. name is the
// plugin refused, with the error.
func (r *Registry) CheckAll(confs map[string]json.RawMessage, consumer bool) (name string, err error) {
	check := r.Check
	if consumer {
		check = r.CheckConsumer
	}
	for _, name := range slices.Sorted(maps.Keys(confs)) {
		if err := check(name, confs[name]); err != nil {
			return name, err
		}
	}
	return "", nil
}

func checkError(name string, err error) error {
	return fmt.Errorf("failed to check the configuration of plugin %s err: %w", name, err)
}

// Configured is one plugin of a route, built. Its Entry is the
// registry's, shared by every route of the plugin and never written: 24
// bytes where a copy of it made 40, and a route's list of two plugins
// (Phases.Plugins) 48 bytes where it was 80.
type Configured struct {
	*Entry
	Instance Instance
}

// Shareable is a Plugin whose instance is a function of its
// configuration alone: its Build reads nothing of Env, and an instance
// keeps nothing of a request once the phase it runs in returns (its
// scratch space serves one call, on the event loop that runs them all).
// The routes of one worker whose configurations of such a plugin are the
// same bytes may then be served by one instance (BuildPhasesShared): at
// 50 000 routes with the same proxy-rewrite, one instance instead of
// 50 000.
type Shareable interface {
	Plugin
	// ShareInstances marks the plugin; it is not called.
	ShareInstances()
}

// Shares reports whether plugin name is Shareable.
func (r *Registry) Shares(name string) bool {
	_, p, ok := r.Lookup(name)
	if !ok {
		return false
	}
	_, s := p.(Shareable)
	return s
}

// Share gives BuildPhasesShared the instance of a Shareable plugin for
// its configuration raw (checked, without references): one built before
// for the same name and bytes, or build's. It runs off the event loop,
// during one build, and is called by that build's goroutine only.
type Share func(name string, raw json.RawMessage, build func() (Instance, error)) (Instance, error)

// Build checks and builds a "plugins" object in execution order (priority,
// highest first, then name), each configuration with its references
// resolved. The first refusal is returned, with Check's messages; one
// because of a reference matches ErrReference.
func (r *Registry) Build(conf map[string]json.RawMessage, env Env) ([]Configured, error) {
	return r.build(conf, env, false)
}

// build is Build; checked: conf was checked by a registry of r's
// fingerprint (Trusts), and its configurations without references are
// built without being checked again.
func (r *Registry) build(conf map[string]json.RawMessage, env Env, checked bool) ([]Configured, error) {
	return r.buildShared(conf, env, checked, nil)
}

// buildShared is build with the instances of the Shareable plugins whose
// configurations hold no reference given by share when it is not nil.
func (r *Registry) buildShared(conf map[string]json.RawMessage, env Env, checked bool, share Share) ([]Configured, error) {
	// Name order: the same error first for the same configuration.
	return r.buildList(spec.MakePluginList(conf), env, checked, share)
}

// buildList is buildShared of a configuration in name order.
func (r *Registry) buildList(conf spec.PluginList, env Env, checked bool, share Share) ([]Configured, error) {
	out := make([]Configured, 0, len(conf))
	for _, pc := range conf {
		name, raw := pc.Name, pc.Raw
		e, p, ok := r.lookupEntry(name)
		if !ok {
			return nil, fmt.Errorf("%w [%s]", ErrUnknown, name)
		}
		resolved, refs, err := r.check(name, p, raw, checked)
		if err != nil {
			return nil, err
		}
		var inst Instance
		if _, ok := p.(Shareable); ok && share != nil && refs == nil && !mayHoldRefs(raw) {
			inst, err = share(name, resolved, func() (Instance, error) { return p.Build(resolved, env) })
		} else {
			inst, err = p.Build(resolved, env)
		}
		if err != nil {
			return nil, checkError(name, redactRefs(err, refs))
		}
		out = append(out, Configured{Entry: e, Instance: inst})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out, nil
}

// BuildPhases builds a "plugins" object into its phase tables.
func (r *Registry) BuildPhases(conf map[string]json.RawMessage, env Env) (Phases, error) {
	return r.BuildPhasesChecked(conf, env, false)
}

// BuildPhasesChecked is BuildPhases of a configuration that a registry of
// r's fingerprint checked when checked is set (Trusts): its plugins'
// configurations are built without being checked again, but for those
// holding a reference, which resolve here.
func (r *Registry) BuildPhasesChecked(conf map[string]json.RawMessage, env Env, checked bool) (Phases, error) {
	return r.BuildPhasesShared(conf, env, checked, nil)
}

// BuildPhasesShared is BuildPhasesChecked with the instances of the
// Shareable plugins whose configurations hold no reference given by
// share (nil: each built anew).
func (r *Registry) BuildPhasesShared(conf map[string]json.RawMessage, env Env, checked bool, share Share) (Phases, error) {
	built, err := r.buildShared(conf, env, checked, share)
	if err != nil {
		return Phases{}, err
	}
	return NewPhases(built), nil
}

// BuildPhasesList is BuildPhasesShared of a configuration in the form a
// worker keeps of a route's (spec.Route.PluginList).
func (r *Registry) BuildPhasesList(conf spec.PluginList, env Env, checked bool, share Share) (Phases, error) {
	built, err := r.buildList(conf, env, checked, share)
	if err != nil {
		return Phases{}, err
	}
	return NewPhases(built), nil
}

// Lookup is Default.Lookup.
func Lookup(name string) (Entry, Plugin, bool) { return Default.Lookup(name) }

// Names is Default.Names: the plugins this gateway has.
func Names() []string { return Default.Names() }

// Check is Default.Check: what the Admin API answers 400 with.
func Check(name string, raw json.RawMessage) error { return Default.Check(name, raw) }

// CheckConsumer is Default.CheckConsumer.
func CheckConsumer(name string, raw json.RawMessage) error { return Default.CheckConsumer(name, raw) }
