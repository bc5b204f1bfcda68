package adminapi

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// uniqueKeyAttrs are the members by which an authentication plugin finds
// its consumer (APISIX's apisix/consumer.lua plugin_unique_key_attrs): no
// two consumers or credentials may share one, or a request could not say
// who it is.
var uniqueKeyAttrs = map[string]string{
	"key-auth":           "key",
	"basic-auth":         "username",
	"jwt-auth":           "key",
	"hmac-auth":          "key_id",
	"ldap-auth":          "user_dn",
	"ldap-auth-advanced": "user_dn",
}

// checkUniqueKeys refuses a consumer's or a credential's plugins when
// another consumer or credential already has the same key, with APISIX's
// message. consumer is the owner being written, credential its
// credential id ("" for the consumer itself); a consumer does not
// conflict with itself nor with its own credentials, a credential only
// not with itself. Secret references are not resolved, as in APISIX.
// Two writes racing with the same key can both pass, as in APISIX: the
// check reads, then the write writes.
func (a *api) checkUniqueKeys(ctx context.Context, obj map[string]any, consumer, credential string) *apiError {
	confs, _ := obj["plugins"].(map[string]any)
	type want struct{ plugin, attr, value string }
	var wants []want
	for _, name := range slices.Sorted(maps.Keys(confs)) {
		attr, ok := uniqueKeyAttrs[name]
		conf, isObj := confs[name].(map[string]any)
		if !ok || !isObj {
			continue
		}
		if v, ok := conf[attr].(string); ok && !strings.HasPrefix(v, "$secret://") && !strings.HasPrefix(v, "$env://") {
			wants = append(wants, want{name, attr, v})
		}
	}
	if len(wants) == 0 {
		return nil
	}
	dir := a.dir("consumers")
	kvs, _, err := a.st.List(ctx, dir)
	if err != nil {
		return storeError(err)
	}
	for _, kv := range kvs {
		owner, cred, _ := strings.Cut(strings.TrimPrefix(kv.Key, dir), "/credentials/")
		if owner == consumer && (credential == "" || cred == credential) {
			continue
		}
		other, ok := decodeStored(kv.Value)
		if !ok {
			continue
		}
		a.openPluginsOf(other, true) // stored encrypted, compared in clear
		theirs, _ := other["plugins"].(map[string]any)
		for _, w := range wants {
			conf, _ := theirs[w.plugin].(map[string]any)
			if v, ok := conf[w.attr].(string); !ok || v != w.value {
				continue
			}
			desc := "consumer: " + owner
			if cred != "" {
				desc = "credential: " + cred + " of consumer: " + owner
			}
			return &apiError{Status: http.StatusBadRequest, Field: "plugins." + w.plugin + "." + w.attr,
				Msg: "duplicate " + w.attr + " of plugin " + w.plugin + " found with " + desc}
		}
	}
	return nil
}
