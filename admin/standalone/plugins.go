package standalone

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"

	"coregate/admin/spec"
	"coregate/plugins"
)

// CheckPlugins checks the plugin configurations of a loaded file with reg,
// as the Admin API checks them before it stores an object: every plugin of
// every route, service, consumer, credential, plugin config and global
// rule, and each plugin's metadata, and the references of the served ssl
// objects' certificates and keys, their $env:// references resolved as
// the workers will resolve them (a variable that is not set refuses the
// file, as does a $secret:// reference that cannot be read with the
// registry's SecretSource, which CheckFile hands the file's secrets
// first). The first one refused is returned
// as a *LoadError (ErrInvalid) naming the item, so that a file a worker
// could not build is refused where the file is read, with the previous
// configuration serving, or the node not starting, as for any other
// invalid file. path is the file's, for the error. A Spec that passes is
// marked checked by reg (spec.Spec.Checked), so that the workers do not
// check its configurations again.
func CheckPlugins(path string, s *spec.Spec, reg *plugins.Registry) error {
	fail := func(item string, err error) error {
		return &LoadError{File: filepath.Base(path), Item: item, Msg: err.Error(), kind: ErrInvalid, err: err}
	}
	check := func(item string, confs map[string]json.RawMessage, consumer bool) error {
		if _, err := reg.CheckAll(confs, consumer); err != nil {
			return fail(item, err)
		}
		return nil
	}
	for _, r := range s.Routes {
		if err := check("routes (id "+r.ID.String()+")", r.Plugins, false); err != nil {
			return err
		}
	}
	for _, sv := range s.Services {
		if err := check("services (id "+sv.ID.String()+")", sv.Plugins, false); err != nil {
			return err
		}
	}
	for _, c := range s.Consumers {
		if err := check("consumers (username "+c.Username+")", c.Plugins, true); err != nil {
			return err
		}
	}
	for _, raw := range s.Credentials {
		var v struct {
			Plugins map[string]json.RawMessage `json:"plugins"`
		}
		item := "consumers (id " + spec.RawID(raw, "id").String() + ")"
		if err := json.Unmarshal(raw, &v); err != nil {
			return fail(item, err)
		}
		if err := check(item, v.Plugins, true); err != nil {
			return err
		}
		if _, err := reg.CheckCredential(v.Plugins); err != nil {
			return fail(item, err)
		}
	}
	for _, pc := range s.PluginConfigs {
		if err := check("plugin_configs (id "+pc.ID.String()+")", pc.Plugins, false); err != nil {
			return err
		}
	}
	for _, gr := range s.GlobalRules {
		if err := check("global_rules (id "+gr.ID.String()+")", gr.Plugins, false); err != nil {
			return err
		}
	}
	for _, g := range s.ConsumerGroups {
		if err := check("consumer_groups (id "+g.ID.String()+")", g.Plugins, false); err != nil {
			return err
		}
	}
	for _, raw := range s.PluginMetadata {
		name, conf, err := plugins.SplitMetadata(raw)
		if err == nil {
			err = reg.CheckMetadata(name, conf)
		}
		if err != nil {
			return fail("plugin_metadata (id "+name+")", err)
		}
	}
	for _, sl := range s.SSLs {
		if err := checkSSLRefs(sl, reg); err != nil {
			return fail("ssls (id "+sl.ID.String()+")", err)
		}
	}
	s.Checked = reg.Fingerprint()
	return nil
}

// checkSSLRefs resolves the references of a served ssl object's cert,
// key, certs, keys and client.ca with reg (plugins.Registry.Resolve), as
// the workers resolve them when they build its certificate: the first
// that does not resolve is the error, naming the member and the
// reference, never a value.
func checkSSLRefs(sl *spec.SSL, reg *plugins.Registry) error {
	if !sl.Served() {
		return nil
	}
	resolve := func(field, s string) error {
		if _, _, err := reg.Resolve(s); err != nil {
			return errors.New(field + ": " + err.Error())
		}
		return nil
	}
	if err := resolve("cert", sl.Cert); err != nil {
		return err
	}
	if err := resolve("key", sl.Key); err != nil {
		return err
	}
	for i, c := range sl.Certs {
		if err := resolve("certs["+strconv.Itoa(i)+"]", c); err != nil {
			return err
		}
	}
	for i, k := range sl.Keys {
		if err := resolve("keys["+strconv.Itoa(i)+"]", k); err != nil {
			return err
		}
	}
	if sl.Client != nil {
		return resolve("client.ca", sl.Client.CA)
	}
	return nil
}
