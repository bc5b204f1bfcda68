package plugins_test

import (
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAttachConsumer: attach_consumer's headers replace what the client
// sent, an empty value removes its header, and the consumer is attached;
// once its buffer has grown, it allocates nothing.
func TestAttachConsumer(t *testing.T) {
	k := &plugins.Consumer{Username: "jack", CustomID: "custom-1"}
	for _, tc := range []struct {
		name, credID, customID string
		want                   map[string]string
	}{
		{"consumer's own", "", "custom-1", map[string]string{"x-consumer-username": "jack", "x-consumer-custom-id": "custom-1", "x-other": "1"}},
		{"credential object", "cred-1", "custom-1", map[string]string{"x-consumer-username": "jack", "x-credential-identifier": "cred-1",
			"x-consumer-custom-id": "custom-1", "x-other": "1"}},
		{"anonymous", "", "", map[string]string{"x-consumer-username": "jack", "x-other": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plugintest.NewCtx("GET", "/").WithHeader("X-Consumer-Username", "admin").
				WithHeader("X-Credential-Identifier", "c").WithHeader("x-consumer-custom-id", "x").WithHeader("X-Other", "1")
			var buf []byte
			buf = plugins.AttachConsumer(c, k, tc.credID, tc.customID, buf)
			got := map[string]string{}
			for _, h := range c.UpstreamHeaders() {
				got[strings.ToLower(h.Name)] = string(h.Value)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("upstream headers %v, want %v", got, tc.want)
			}
			for n, v := range tc.want {
				if got[n] != v {
					t.Fatalf("upstream headers %v, want %v", got, tc.want)
				}
			}
			if c.Consumer() != k {
				t.Fatalf("consumer %v", c.Consumer())
			}
			plugintest.AllocsPerRun(t, 100, func() {
				c.Reset()
				buf = plugins.AttachConsumer(c, k, tc.credID, tc.customID, buf)
			})
		})
	}
}

// TestAttachConsumerUnderscores: a client's field whose name is one of
// attach_consumer's with '_' for some '-' is removed too, in any case, so
// that an upstream that reads headers by their CGI names
// (HTTP_X_CONSUMER_USERNAME) cannot be told another consumer; other
// fields with '_' pass; once grown, nothing is allocated.
func TestAttachConsumerUnderscores(t *testing.T) {
	k := &plugins.Consumer{Username: "jack"}
	c := plugintest.NewCtx("GET", "/").WithHeader("X_Consumer_Username", "admin").
		WithHeader("x-consumer_username", "admin").WithHeader("X_Credential-Identifier", "c").
		WithHeader("X-CONSUMER_CUSTOM-ID", "x").WithHeader("X_Consumer_Custom_ID", "x").WithHeader("X_Other", "1")
	var buf []byte
	buf = plugins.AttachConsumer(c, k, "", "", buf)
	got := map[string]string{}
	for _, h := range c.UpstreamHeaders() {
		got[h.Name] = string(h.Value)
	}
	want := map[string]string{"X-Consumer-Username": "jack", "X_Other": "1"}
	if len(got) != len(want) || got["X-Consumer-Username"] != "jack" || got["X_Other"] != "1" {
		t.Fatalf("upstream headers %v, want %v", got, want)
	}
	plugintest.AllocsPerRun(t, 100, func() {
		c.Reset()
		buf = plugins.AttachConsumer(c, k, "", "", buf)
	})
}
