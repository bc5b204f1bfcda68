package adminapi

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"

	"coregate/admin/protofile"
	"coregate/admin/spec"
	"coregate/plugins"
)

// resource is one kind of stored object: its URL segment, which is also
// its etcd directory, the word APISIX's messages use for it, the methods
// it refuses, how an object is checked before it is stored, and who may
// refer to it.
type resource struct {
	name string // "routes": /apisix/admin/routes, <prefix>/routes/<id>
	kind string // "route", "plugin config": in messages
	// schemaKind names the schema of GET /apisix/admin/schema/{kind}.
	schemaKind string
	// noID: the key comes from a member of the object (consumers: the
	// username), which has no id member.
	noID            bool
	noPost, noPatch bool
	// noTime: no create_time and update_time are added (plugin metadata).
	noTime bool
	// check validates an object as it is about to be stored.
	check func(a *api, ctx context.Context, w *write) *apiError
	// schemaCheck is the schema alone, for POST /schema/validate/{name}.
	schemaCheck func(raw []byte) error
	// usedBy lists the references that keep an object from being deleted.
	usedBy []reference
	// refusal starts the message of a refused delete.
	refusal string
	// filterFields are the members the list's filter= argument may test.
	filterFields map[string]bool
}

// reference is a member of the objects in dir that names another object.
type reference struct {
	dir, kind, field string
}

// write is an object on its way to the store.
type write struct {
	rs  *resource
	id  string         // the id its key ends with
	obj map[string]any // the object
	raw []byte         // obj encoded: what is validated and stored
	// urlID is the id the URL gave ("" for none); consumer is a
	// credential's consumer, manager a secret's.
	urlID, consumer, manager string
}

var resources = map[string]*resource{
	"routes": {
		name: "routes", kind: "route", schemaKind: spec.KindRoute,
		check: (*api).checkRoute, schemaCheck: objectSchema(spec.KindRoute),
		filterFields: map[string]bool{"service_id": true, "upstream_id": true},
	},
	"services": {
		name: "services", kind: "service", schemaKind: spec.KindService,
		check: (*api).checkService, schemaCheck: objectSchema(spec.KindService),
		usedBy:  []reference{{"routes", "route", "service_id"}},
		refusal: "can not delete this service directly, ",
	},
	"upstreams": {
		name: "upstreams", kind: "upstream", schemaKind: spec.KindUpstream,
		check: (*api).checkUpstream, schemaCheck: objectSchema(spec.KindUpstream),
		usedBy:  []reference{{"routes", "route", "upstream_id"}, {"services", "service", "upstream_id"}},
		refusal: "can not delete this upstream, ",
	},
	"consumers": {
		name: "consumers", kind: "consumer", schemaKind: spec.KindConsumer, noID: true, noPost: true, noPatch: true,
		check: (*api).checkConsumer, schemaCheck: objectSchema(spec.KindConsumer),
	},
	"credentials": {
		name: "credentials", kind: "credential", schemaKind: "credential", noPost: true, noPatch: true,
		check: (*api).checkCredential, schemaCheck: localSchema(credentialSchema),
	},
	"plugin_configs": {
		name: "plugin_configs", kind: "plugin config", schemaKind: spec.KindPluginConfig, noPost: true,
		check: (*api).checkPluginConfig, schemaCheck: objectSchema(spec.KindPluginConfig),
		usedBy:  []reference{{"routes", "route", "plugin_config_id"}},
		refusal: "can not delete this plugin config, ",
	},
	"consumer_groups": {
		name: "consumer_groups", kind: "consumer group", schemaKind: spec.KindConsumerGroup, noPost: true,
		check: (*api).checkConsumerGroup, schemaCheck: objectSchema(spec.KindConsumerGroup),
		usedBy:  []reference{{"consumers", "consumer", "group_id"}},
		refusal: "can not delete this consumer group, ",
	},
	// A proto is refused for deletion while a route's or a service's
	// grpc-transcode names it, in APISIX; coregate has no grpc-transcode
	// yet, so nothing can name one.
	"protos": {
		name: "protos", kind: "proto", schemaKind: spec.KindProto, noPatch: true,
		check: (*api).checkProto, schemaCheck: objectSchema(spec.KindProto),
	},
	"secrets": {
		name: "secrets", kind: "secret", noPost: true,
		check: (*api).checkSecret, schemaCheck: noSecretSchema,
	},
	"global_rules": {
		name: "global_rules", kind: "global rule", schemaKind: spec.KindGlobalRule, noPost: true,
		check: (*api).checkGlobalRule, schemaCheck: objectSchema(spec.KindGlobalRule),
	},
	"ssls": {
		name: "ssls", kind: "ssl", schemaKind: spec.KindSSL,
		check: (*api).checkSSL, schemaCheck: objectSchema(spec.KindSSL),
	},
	"plugin_metadata": {
		name: "plugin_metadata", kind: "plugin_metadata", noID: true, noPost: true, noPatch: true, noTime: true,
		check: (*api).checkPluginMetadata, schemaCheck: func([]byte) error { return nil },
	},
}

// objectSchema is spec's schema check of a kind, without the
// "invalid configuration: " prefix that /schema/validate leaves out.
func objectSchema(kind string) func([]byte) error {
	return func(raw []byte) error { return spec.ValidateObject(kind, raw) }
}

func localSchema(s func() (*spec.Schema, error)) func([]byte) error {
	return func(raw []byte) error {
		sch, err := s()
		if err != nil {
			return err
		}
		if err := sch.Validate(raw); err != nil {
			var ve *spec.ValidationError
			if errors.As(err, &ve) {
				c := *ve
				c.Msg = "invalid configuration: " + c.Msg
				return &c
			}
			return err
		}
		return nil
	}
}

// The schema of the kind spec has none for yet, transcribed from
// apisix/schema_def.lua.
var (
	//go:embed schema/credential.json
	credentialSchemaJSON []byte

	credentialSchema = sync.OnceValues(func() (*spec.Schema, error) { return spec.CompileSchema("credential", credentialSchemaJSON) })
)

// localSchemaJSON is the document GET /apisix/admin/schema/{kind} shows
// for the kinds whose schema lives here.
func localSchemaJSON(kind string) []byte {
	var s func() (*spec.Schema, error)
	switch kind {
	case "credential":
		s = credentialSchema
	default:
		return nil
	}
	sch, err := s()
	if err != nil {
		return nil
	}
	return sch.JSON()
}

func (a *api) checkRoute(ctx context.Context, w *write) *apiError {
	r, err := spec.DecodeRoute(w.raw)
	if err != nil {
		return invalid(err, "")
	}
	if e := a.checkRef(ctx, "upstreams", "upstream", "upstream_id", r.UpstreamID); e != nil {
		return e
	}
	if e := a.checkRef(ctx, "services", "service", "service_id", r.ServiceID); e != nil {
		return e
	}
	if e := a.checkRef(ctx, "plugin_configs", "plugin config", "plugin_config_id", r.Rare().PluginConfigID); e != nil {
		return e
	}
	if e := a.checkClientCertID(ctx, r.Upstream, "upstream."); e != nil {
		return e
	}
	return a.checkPlugins(w.obj, "", false)
}

func (a *api) checkService(ctx context.Context, w *write) *apiError {
	s, err := spec.DecodeService(w.raw)
	if err != nil {
		return invalid(err, "")
	}
	if e := a.checkRef(ctx, "upstreams", "upstream", "upstream_id", s.UpstreamID); e != nil {
		return e
	}
	if e := a.checkClientCertID(ctx, s.Upstream, "upstream."); e != nil {
		return e
	}
	return a.checkPlugins(w.obj, "", false)
}

func (a *api) checkUpstream(ctx context.Context, w *write) *apiError {
	u, err := spec.DecodeUpstream(w.raw)
	if err != nil {
		return invalid(err, "")
	}
	return a.checkClientCertID(ctx, u, "")
}

// checkClientCertID is APISIX's check of an upstream's tls
// (check_upstream_conf): client_cert and client_key parse, and the ssl
// object client_cert_id names exists and is of type client. field
// prefixes the field named (an inline upstream's "upstream.").
func (a *api) checkClientCertID(ctx context.Context, u *spec.Upstream, field string) *apiError {
	if u == nil || len(u.Rare().TLS) == 0 {
		return nil
	}
	var t struct {
		ClientCertID *spec.ID `json:"client_cert_id"`
		ClientCert   string   `json:"client_cert"`
		ClientKey    string   `json:"client_key"`
	}
	if json.Unmarshal(u.Rare().TLS, &t) != nil {
		return nil // the schema checked it
	}
	if t.ClientCert != "" {
		// apisix_ssl.validate, as for an ssl object's pair.
		if err := spec.CheckCertKey(t.ClientCert, t.ClientKey, field+"tls.client_cert", field+"tls.client_key",
			a.keyring.DecryptPrivateKey); err != nil {
			return invalid(err, "")
		}
	}
	if t.ClientCertID == nil {
		return nil
	}
	id := t.ClientCertID.String()
	field += "tls.client_cert_id"
	value, e := a.fetchRef(ctx, "ssls", "ssl", field, *t.ClientCertID)
	if e != nil {
		return e
	}
	var sl struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(value, &sl) != nil || sl.Type != "client" {
		return &apiError{Status: http.StatusBadRequest, Field: field,
			Msg: "failed to fetch ssl info by ssl id [" + id + "], wrong ssl type"}
	}
	return nil
}

func (a *api) checkConsumer(ctx context.Context, w *write) *apiError {
	if err := spec.ValidateObject(spec.KindConsumer, w.raw); err != nil {
		return invalid(err, "")
	}
	name, _ := w.obj["username"].(string) // the schema requires a string
	if w.urlID != "" && w.urlID != name {
		return &apiError{Status: http.StatusBadRequest, Msg: "wrong username", Field: "username"}
	}
	w.id = name
	if e := a.checkPlugins(w.obj, "invalid plugins configuration: ", true); e != nil {
		return e
	}
	if e := a.checkUniqueKeys(ctx, w.obj, name, ""); e != nil {
		return e
	}
	// The group a consumer names exists (admin/consumers.lua).
	return a.checkRef(ctx, "consumer_groups", "consumer group", "group_id", spec.RawID(w.raw, "group_id"))
}

func (a *api) checkCredential(ctx context.Context, w *write) *apiError {
	if err := localSchema(credentialSchema)(w.raw); err != nil {
		return invalid(err, "")
	}
	if e := a.checkPlugins(w.obj, "invalid plugins configuration: ", true); e != nil {
		return e
	}
	// Its plugin authenticates: a credential is how a consumer is found.
	if name, err := a.plugins.CheckCredential(pluginConfs(w.obj)); err != nil {
		return &apiError{Status: http.StatusBadRequest, Field: "plugins." + name, Msg: plugins.ErrNotAuth.Error()}
	}
	if e := a.checkUniqueKeys(ctx, w.obj, w.consumer, w.id); e != nil {
		return e
	}
	// A credential belongs to a consumer that exists.
	if _, err := a.st.Get(ctx, a.key("consumers", w.consumer)); err != nil {
		if e := storeError(err); !e.NotFound {
			return e
		}
		return &apiError{Status: http.StatusNotFound, Msg: "consumer not found"}
	}
	return nil
}

func (a *api) checkPluginConfig(_ context.Context, w *write) *apiError {
	if err := spec.ValidateObject(spec.KindPluginConfig, w.raw); err != nil {
		return invalid(err, "")
	}
	return a.checkPlugins(w.obj, "", false)
}

// checkConsumerGroup is checkPluginConfig for a consumer group
// (admin/consumer_group.lua): its plugins are checked as a route's.
func (a *api) checkConsumerGroup(_ context.Context, w *write) *apiError {
	if err := spec.ValidateObject(spec.KindConsumerGroup, w.raw); err != nil {
		return invalid(err, "")
	}
	return a.checkPlugins(w.obj, "", false)
}

// checkProto is APISIX's check of a proto (admin/proto.lua): the schema,
// then the content compiled (package protofile), refused with "invalid
// content: " and the compiler's message.
func (a *api) checkProto(_ context.Context, w *write) *apiError {
	if err := spec.ValidateObject(spec.KindProto, w.raw); err != nil {
		return invalid(err, "")
	}
	content, _ := w.obj["content"].(string) // the schema requires a string
	if err := protofile.Check(content); err != nil {
		return &apiError{Status: http.StatusBadRequest, Field: "content", Msg: "invalid content: " + err.Error()}
	}
	return nil
}

// checkGlobalRule adds APISIX's rule that a plugin runs from one global
// rule only.
func (a *api) checkGlobalRule(ctx context.Context, w *write) *apiError {
	if err := spec.ValidateObject(spec.KindGlobalRule, w.raw); err != nil {
		return invalid(err, "")
	}
	if e := a.checkPlugins(w.obj, "", false); e != nil {
		return e
	}
	mine, _ := w.obj["plugins"].(map[string]any)
	if len(mine) == 0 {
		return nil
	}
	kvs, _, err := a.st.List(ctx, a.dir("global_rules"))
	if err != nil {
		return storeError(err)
	}
	for _, kv := range kvs {
		other, ok := decodeStored(kv.Value)
		if !ok {
			continue
		}
		oid, _ := idText(other["id"])
		if oid == "" || oid == w.id {
			continue
		}
		theirs, _ := other["plugins"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(mine)) {
			if _, dup := theirs[name]; dup {
				return &apiError{Status: http.StatusBadRequest, Field: "plugins." + name,
					Msg: "plugin '" + name + "' already exists in global rule with id '" + oid + "'"}
			}
		}
	}
	return nil
}

// checkRef checks that the object an id member names exists, with
// APISIX's message when it does not.
func (a *api) checkRef(ctx context.Context, dir, kind, field string, id spec.ID) *apiError {
	if id.IsZero() {
		return nil
	}
	_, e := a.fetchRef(ctx, dir, kind, field, id)
	return e
}

// fetchRef reads the object id of dir that field refers to, with
// APISIX's message when there is none (checkRef).
func (a *api) fetchRef(ctx context.Context, dir, kind, field string, id spec.ID) ([]byte, *apiError) {
	kv, err := a.st.Get(ctx, a.key(dir, id.String()))
	if err != nil {
		e := storeError(err)
		if !e.NotFound {
			return nil, e
		}
		return nil, &apiError{Status: http.StatusBadRequest, Field: field,
			Msg: "failed to fetch " + kind + " info by " + kind + " id [" + id.String() + "], response code: 404"}
	}
	return kv.Value, nil
}

// checkPlugins checks every entry of the object's "plugins" with the
// plugin registry (Registry.CheckAll); prefix is what the resource puts
// before the registry's message. consumer: a consumer's or a
// credential's plugins, where a plugin with a consumer schema (key-auth's
// {"key"}) is checked against it, as APISIX checks them with
// TYPE_CONSUMER.
func (a *api) checkPlugins(obj map[string]any, prefix string, consumer bool) *apiError {
	if name, err := a.plugins.CheckAll(pluginConfs(obj), consumer); err != nil {
		e := invalid(err, "plugins."+name)
		e.Msg = prefix + e.Msg
		return e
	}
	return nil
}

// checkPluginMetadata is APISIX's check of plugin metadata
// (admin/plugin_metadata.lua): the plugin named by the URL must exist and
// the object, without its id, pass the plugin's metadata schema; the id
// stored is the plugin's name.
func (a *api) checkPluginMetadata(_ context.Context, w *write) *apiError {
	if w.urlID == "" {
		return badRequest("missing plugin name")
	}
	conf := w.raw // not an object: the schema refuses it
	if w.obj != nil {
		m := make(map[string]any, len(w.obj))
		for k, v := range w.obj {
			if k != "id" {
				m[k] = v
			}
		}
		conf = encodeJSON(m)
	}
	if err := a.plugins.CheckMetadata(w.urlID, conf); err != nil {
		if errors.Is(err, plugins.ErrInvalidName) {
			return badRequest("invalid plugin name")
		}
		e := invalid(err, "")
		e.Msg = "invalid configuration: " + e.Msg
		return e
	}
	w.id = w.urlID
	if w.obj["id"] != w.urlID {
		w.obj["id"] = w.urlID
		w.raw = encodeJSON(w.obj)
	}
	return nil
}
