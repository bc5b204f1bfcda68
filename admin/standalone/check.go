package standalone

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"

	"coregate/admin/spec"
	"coregate/plugins"

	"go.yaml.in/yaml/v3"
)

// CheckFile checks the file at path as a node reads it and returns every
// problem, where Load stops at the first: a file refused as a whole (it
// does not parse, lacks its #END, …) is that one error; otherwise each
// item that would be left out is a *LoadError naming it — an item that
// fails validation, one whose plugins reg refuses (nil: plugins are not
// checked), one whose references dangle — joined (errors.Join), nil when
// there is none. It is what `coregate -t` reports.
func CheckFile(path string, reg *plugins.Registry) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &LoadError{File: filepath.Base(path), Msg: err.Error(), kind: ErrFormat, err: err}
	}
	l := &loader{file: filepath.Base(path)}
	doc, err := l.parse(data, path, os.LookupEnv)
	if err != nil {
		return err
	}
	var errs []error
	s := new(spec.Spec)
	if reg != nil {
		// The secrets first: the plugins' $secret:// references are read
		// with them, whichever list comes first in the file.
		var secrets spec.Spec
		_ = l.walk(doc, func(key string, index int, n *yaml.Node) error {
			if key == "secrets" {
				_ = l.item(&secrets, key, index, n) // refused below, in the file's order
			}
			return nil
		})
		reg.UpdateSecrets(secrets.Secrets)
	}
	err = l.walk(doc, func(key string, index int, n *yaml.Node) error {
		var one spec.Spec
		if err := l.item(&one, key, index, n); err != nil {
			errs = append(errs, err)
			return nil
		}
		if reg != nil {
			if err := CheckPlugins(path, &one, reg); err != nil {
				errs = append(errs, err)
				return nil
			}
		}
		s.Routes = append(s.Routes, one.Routes...)
		s.Services = append(s.Services, one.Services...)
		s.Upstreams = append(s.Upstreams, one.Upstreams...)
		s.Consumers = append(s.Consumers, one.Consumers...)
		s.PluginConfigs = append(s.PluginConfigs, one.PluginConfigs...)
		s.GlobalRules = append(s.GlobalRules, one.GlobalRules...)
		s.ConsumerGroups = append(s.ConsumerGroups, one.ConsumerGroups...)
		s.Credentials = append(s.Credentials, one.Credentials...)
		s.PluginMetadata = append(s.PluginMetadata, one.PluginMetadata...)
		s.SSLs = append(s.SSLs, one.SSLs...)
		s.Secrets = append(s.Secrets, one.Secrets...)
		return nil
	})
	if err != nil {
		return err
	}
	// Each dangling reference or duplicate id, the object at fault left
	// out as the store's sync leaves it out, until none is left.
	for range objects(s) + 1 {
		err := s.Check()
		var re *spec.ReferenceError
		if !errors.As(err, &re) {
			if err != nil {
				errs = append(errs, l.fail("", err.Error(), ErrInvalid, err))
			}
			break
		}
		errs = append(errs, l.fail("", err.Error(), ErrInvalid, err))
		if !drop(s, re.Kind, re.ID) {
			break
		}
	}
	return errors.Join(errs...)
}

func objects(s *spec.Spec) int {
	return len(s.Routes) + len(s.Services) + len(s.Upstreams) + len(s.Consumers) + len(s.PluginConfigs) +
		len(s.GlobalRules) + len(s.ConsumerGroups) + len(s.Credentials) + len(s.PluginMetadata) + len(s.SSLs) + len(s.Secrets)
}

// drop removes the last object of kind with id from s: the one a
// reference error names (of a duplicate id, the later).
func drop(s *spec.Spec, kind, id string) bool {
	switch kind {
	case "route":
		return dropLast(&s.Routes, func(r *spec.Route) bool { return r.ID.String() == id })
	case "service":
		return dropLast(&s.Services, func(v *spec.Service) bool { return v.ID.String() == id })
	case "upstream":
		return dropLast(&s.Upstreams, func(u *spec.Upstream) bool { return u.ID.String() == id })
	case "consumer":
		return dropLast(&s.Consumers, func(c *spec.Consumer) bool { return c.Username == id })
	case "plugin_config":
		return dropLast(&s.PluginConfigs, func(pc *spec.PluginConfig) bool { return pc.ID.String() == id })
	case "global_rule":
		return dropLast(&s.GlobalRules, func(g *spec.GlobalRule) bool { return g.ID.String() == id })
	case "consumer_group":
		return dropLast(&s.ConsumerGroups, func(g *spec.ConsumerGroup) bool { return g.ID.String() == id })
	case "credential":
		return dropLast(&s.Credentials, func(raw json.RawMessage) bool { return spec.RawID(raw, "id").String() == id })
	case "secret":
		return dropLast(&s.Secrets, func(raw json.RawMessage) bool { return spec.RawID(raw, "id").String() == id })
	case "plugin_metadata":
		return dropLast(&s.PluginMetadata, func(raw json.RawMessage) bool { return spec.RawID(raw, "id").String() == id })
	case "ssl":
		return dropLast(&s.SSLs, func(sl *spec.SSL) bool { return sl.ID.String() == id })
	}
	return false
}

func dropLast[T any](list *[]T, match func(T) bool) bool {
	for i := len(*list) - 1; i >= 0; i-- {
		if match((*list)[i]) {
			*list = slices.Delete(*list, i, i+1)
			return true
		}
	}
	return false
}
