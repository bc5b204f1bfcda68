package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"coregate/admin/protofile"
	"coregate/admin/secret"
	"coregate/admin/spec"

	"go.yaml.in/yaml/v3"
)

// Sentinel errors; every error of this package matches one of them with
// errors.Is (a *LoadError also unwraps to the spec error behind it).
var (
	// ErrEndFlag: a YAML file does not end with #END (it may be half
	// written).
	ErrEndFlag = errors.New("standalone: missing valid end flag")
	// ErrFormat: the file cannot be read or parsed, or is not laid out as
	// top-level lists of objects.
	ErrFormat = errors.New("standalone: malformed file")
	// ErrInvalid: an object fails validation, an environment variable is
	// missing, or the objects do not refer to each other correctly.
	ErrInvalid = errors.New("standalone: invalid configuration")
	// ErrUnsupported: the file holds a key that is unknown, or an APISIX
	// resource coregate does not implement yet.
	ErrUnsupported = errors.New("standalone: unsupported key")
)

// LoadError is a standalone file that cannot be loaded. Its text names the
// file and the item:
//
//	apisix.yaml: routes[2] (id 7): invalid configuration: property "uri" validation failed: …
//	apisix.yaml: missing valid end flag
//	apisix.yaml: route 1: upstream_id 9 not found
//
// Item indexes count from 0; an item without an id is shown with the id it
// gets, arr_<n> counting from 1 as in APISIX.
type LoadError struct {
	File string // base name of the file
	Item string // "routes[2] (id 7)", a top-level key, or ""
	Msg  string
	kind error
	err  error
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	b.WriteString(": ")
	if e.Item != "" {
		b.WriteString(e.Item)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is the sentinel of the error's kind.
func (e *LoadError) Is(target error) bool { return target == e.kind }

// Unwrap returns the spec error behind it, if any.
func (e *LoadError) Unwrap() error { return e.err }

var endFlag = regexp.MustCompile(`#END\s*$`)

// Load reads a standalone configuration file — apisix.yaml, or apisix.json
// when the name ends in .json — and returns the validated Spec with its
// Hash set. ${{VAR}} and ${{VAR:=default}} are substituted from the
// environment. Each object goes through the same strict decoding and
// validation as the Admin API, and then Spec.Check; the first problem is
// returned as a *LoadError. Load is safe for concurrent use.
func Load(path string) (*spec.Spec, error) {
	return LoadEnv(path, os.LookupEnv)
}

// LoadEnv is Load with the environment given by lookup.
func LoadEnv(path string, lookup func(string) (string, bool)) (*spec.Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &LoadError{File: filepath.Base(path), Msg: err.Error(), kind: ErrFormat, err: err}
	}
	return Parse(data, path, lookup)
}

// Parse is Load for file contents already read; path gives the name used
// in errors and the format (JSON when it ends in .json).
func Parse(data []byte, path string, lookup func(string) (string, bool)) (*spec.Spec, error) {
	l := &loader{file: filepath.Base(path)}
	doc, err := l.parse(data, path, lookup)
	if err != nil {
		return nil, err
	}
	s := new(spec.Spec)
	if err := l.top(doc, s); err != nil {
		return nil, err
	}
	if err := s.Check(); err != nil {
		return nil, l.fail("", err.Error(), ErrInvalid, err)
	}
	s.SetHash()
	return s, nil
}

// parse reads the file's document, its ${{VAR}} substituted: what is
// refused here refuses the file as a whole (it does not parse, a YAML file
// lacks #END, a variable is missing).
func (l *loader) parse(data []byte, path string, lookup func(string) (string, bool)) (*yaml.Node, error) {
	var doc *yaml.Node
	if strings.EqualFold(filepath.Ext(path), ".json") {
		d, err := spec.JSONToYAML(data)
		if err != nil {
			return nil, l.fail("", err.Error(), ErrFormat, err)
		}
		doc = d
	} else {
		tail := data[max(0, len(data)-10):]
		if !endFlag.Match(tail) {
			return nil, l.fail("", "missing valid end flag", ErrEndFlag, nil)
		}
		doc = new(yaml.Node)
		if err := yaml.Unmarshal(data, doc); err != nil {
			return nil, l.fail("", err.Error(), ErrFormat, err)
		}
	}
	if err := spec.ResolveEnv(doc, lookup); err != nil {
		return nil, l.fail("", err.Error(), ErrInvalid, err)
	}
	return doc, nil
}

type loader struct {
	file string
}

func (l *loader) fail(item, msg string, kind, err error) *LoadError {
	return &LoadError{File: l.file, Item: item, Msg: msg, kind: kind, err: err}
}

// supported are the top-level lists coregate reads.
var supported = map[string]bool{
	"routes": true, "services": true, "upstreams": true,
	"consumers": true, "plugin_configs": true, "global_rules": true,
	"plugin_metadata": true, "ssls": true, "consumer_groups": true, "protos": true,
	"secrets": true,
}

// notYet are APISIX's other top-level lists: accepted when empty.
var notYet = map[string]bool{
	"stream_routes": true, "plugins": true, "credentials": true,
}

func (l *loader) top(doc *yaml.Node, s *spec.Spec) error {
	return l.walk(doc, func(key string, j int, item *yaml.Node) error { return l.item(s, key, j, item) })
}

// walk calls fn with each item of each list of the file, in order, and
// returns the first error, fn's or the layout's: a top-level key that is
// unknown, a list coregate does not implement that is not empty, a value
// that is not a list.
func (l *loader) walk(doc *yaml.Node, fn func(key string, index int, item *yaml.Node) error) error {
	root := doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	if root.Kind == 0 || root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return l.fail("", "want a mapping of resource lists at the top level", ErrFormat, nil)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		for val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		empty := val.Kind == yaml.ScalarNode && val.ShortTag() == "!!null" ||
			val.Kind == yaml.SequenceNode && len(val.Content) == 0
		switch {
		case supported[key]:
		case notYet[key]:
			if empty {
				continue
			}
			return l.fail(key, "not supported yet", ErrUnsupported, nil)
		default:
			return l.fail(key, "unknown key", ErrUnsupported, nil)
		}
		if empty {
			continue
		}
		if val.Kind != yaml.SequenceNode {
			return l.fail(key, "want a list", ErrFormat, nil)
		}
		for j, item := range val.Content {
			if err := fn(key, j, item); err != nil {
				return err
			}
		}
	}
	return nil
}

// item decodes one list item through the strict decoders.
func (l *loader) item(s *spec.Spec, kind string, index int, n *yaml.Node) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	where := fmt.Sprintf("%s[%d]", kind, index)
	if n.Kind != yaml.MappingNode {
		return l.fail(where, "want an object", ErrFormat, nil)
	}
	raw, err := spec.YAMLToJSON(n)
	if err != nil {
		return l.fail(where, err.Error(), ErrFormat, err)
	}
	idKey := "id"
	if kind == "consumers" {
		idKey = "username"
		// A consumer's credential is listed with the consumers, its id
		// "<username>/credentials/<id>", as APISIX's standalone mode has it.
		if cid := spec.RawID(raw, "id"); spec.RawID(raw, "username").IsZero() && strings.Contains(cid.String(), "/credentials/") {
			where = fmt.Sprintf("%s (id %s)", where, cid.String())
			if _, _, ok := spec.CredentialOwner(cid.String()); !ok {
				return l.fail(where, "a credential's id is <username>/credentials/<id>", ErrInvalid, nil)
			}
			if err := checkCredential(raw); err != nil {
				return l.fail(where, err.Error(), ErrInvalid, err)
			}
			s.Credentials = append(s.Credentials, raw)
			return nil
		}
	}
	id := spec.RawID(raw, idKey)
	if kind == "secrets" {
		// Its id is "<manager>/<id>", as APISIX's standalone mode has it.
		where = fmt.Sprintf("%s (id %s)", where, id.String())
		if err := checkSecret(raw); err != nil {
			return l.fail(where, err.Error(), ErrInvalid, err)
		}
		s.Secrets = append(s.Secrets, raw)
		return nil
	}
	if kind == "plugin_metadata" {
		// The plugin's name is its id; the plugin checks the rest when
		// the worker builds the configuration.
		if id.IsZero() {
			return l.fail(where, "missing plugin name (id)", ErrInvalid, nil)
		}
		s.PluginMetadata = append(s.PluginMetadata, raw)
		return nil
	}
	if id.IsZero() && kind != "consumers" {
		id = spec.StringID(fmt.Sprintf("arr_%d", index+1))
	}
	if !id.IsZero() {
		where = fmt.Sprintf("%s (%s %s)", where, idKey, id.String())
	}
	bad := func(err error) error {
		msg := err.Error()
		if ve, ok := err.(*spec.ValidationError); ok {
			msg = ve.Explain() // APISIX's text, then the field and value at fault
		}
		return l.fail(where, msg, ErrInvalid, err)
	}
	switch kind {
	case "routes":
		r, err := spec.DecodeRoute(raw)
		if err != nil {
			return bad(err)
		}
		if r.ID.IsZero() {
			r.ID = id
		}
		s.Routes = append(s.Routes, r)
	case "services":
		sv, err := spec.DecodeService(raw)
		if err != nil {
			return bad(err)
		}
		if sv.ID.IsZero() {
			sv.ID = id
		}
		s.Services = append(s.Services, sv)
	case "upstreams":
		u, err := spec.DecodeUpstream(raw)
		if err != nil {
			return bad(err)
		}
		if u.ID.IsZero() {
			u.ID = id
		}
		s.Upstreams = append(s.Upstreams, u)
	case "consumers":
		c, err := spec.DecodeConsumer(raw)
		if err != nil {
			return bad(err)
		}
		s.Consumers = append(s.Consumers, c)
	case "plugin_configs":
		pc, err := spec.DecodePluginConfig(raw)
		if err != nil {
			return bad(err)
		}
		s.PluginConfigs = append(s.PluginConfigs, pc)
	case "global_rules":
		gr, err := spec.DecodeGlobalRule(raw)
		if err != nil {
			return bad(err)
		}
		s.GlobalRules = append(s.GlobalRules, gr)
	case "consumer_groups":
		g, err := spec.DecodeConsumerGroup(raw)
		if err != nil {
			return bad(err)
		}
		s.ConsumerGroups = append(s.ConsumerGroups, g)
	case "protos":
		// Checked as the Admin API checks one, then not kept: nothing
		// reads a proto until grpc-transcode exists.
		if err := spec.ValidateObject(spec.KindProto, raw); err != nil {
			return bad(err)
		}
		var p struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return bad(err)
		}
		if err := protofile.Check(p.Content); err != nil {
			return l.fail(where, "invalid content: "+err.Error(), ErrInvalid, err)
		}
	case "ssls":
		// Keys are not read here: they may be encrypted
		// (apisix.data_encryption); the workers' tlsconf reads them.
		sl, err := spec.DecodeSSL(raw)
		if err != nil {
			return bad(err)
		}
		if sl.ID.IsZero() {
			sl.ID = id
		}
		s.SSLs = append(s.SSLs, sl)
	}
	return nil
}

// checkCredential checks what a worker reads of a credential: an object
// whose "plugins", if any, is an object. Each plugin's configuration is the
// plugin's to check when the worker builds the consumers.
func checkCredential(raw json.RawMessage) error {
	var v struct {
		Plugins map[string]json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("invalid credential: %w", err)
	}
	return nil
}

// checkSecret checks a secret of the file: its id "<manager>/<id>" names
// one of APISIX's managers, and the object passes the manager's schema.
func checkSecret(raw []byte) error {
	manager, id, ok := strings.Cut(spec.RawID(raw, "id").String(), "/")
	if !ok || id == "" || strings.Contains(id, "/") || !spec.ValidStringID(id) {
		return errors.New("a secret's id is <manager>/<id>")
	}
	if !secret.Known(manager) {
		return errors.New("invalid secret manager: " + manager)
	}
	if err := secret.Validate(manager, raw); err != nil {
		if ve, ok := err.(*spec.ValidationError); ok {
			return errors.New("invalid configuration: " + ve.Explain())
		}
		return err
	}
	return nil
}
