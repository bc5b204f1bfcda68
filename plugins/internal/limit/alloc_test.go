//go:build !race

package limit

import (
	"encoding/json"
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocKey: a counter's key, of any kind, is built without
// allocating once its buffer has grown.
func TestAllocKey(t *testing.T) {
	s, err := NewSpace("p:", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	c := plugintest.NewCtx("GET", "/?a=1").WithHeader("X-User", "ann")
	buf := make([]byte, 0, 128)
	for _, k := range []Key{
		NewKey("var", "http_x_user"), NewKey("var", "http_x_none").EmptyIsNone(),
		NewKey("var_combination", "$remote_addr $http_x_user ${arg_x ?? d}"),
		NewKey("constant", "k"), RuleKey("$arg_none"),
	} {
		plugintest.AllocsPerRun(t, 200, func() {
			buf, _ = k.Append(s.Append(buf[:0], c), c)
		})
	}
}
