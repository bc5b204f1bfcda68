package router

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAPISIXRouterCases replays the route sets and requests of APISIX's
// t/router and t/node test files; want is the route id APISIX answers with
// (-1: 404). The APISIX test client connects from 127.0.0.1.
func TestAPISIXRouterCases(t *testing.T) {
	const local = "127.0.0.1"
	tests := []struct {
		file   string
		mode   Mode
		routes []Route
		probes []probe
	}{
		{
			file:   "radixtree-host-uri.t TEST 1-5",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Hosts: []string{"foo.com"}}},
			probes: []probe{
				{path: "/not_found", host: "localhost", want: -1},
				{path: "/hello", host: "localhost", want: -1},
				{path: "/hello", host: "not_found.com", want: -1},
				{path: "/hello", host: "foo.com", want: 1},
			},
		},
		{
			file:   "radixtree-host-uri.t TEST 6-8",
			routes: []Route{{Index: 1, URIs: []string{"/server_port"}}},
			probes: []probe{
				{path: "/hello", host: "localhost", want: -1},
				{path: "/server_port", host: "anydomain.com", want: 1},
			},
		},
		{
			file: "radixtree-host-uri.t TEST 9-11",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}},
				{Index: 2, URIs: []string{"/hello"}},
			},
			probes: []probe{
				{path: "/hello2", host: "localhost", want: -1},
				{path: "/hello", host: "anydomain.com", want: 2},
			},
		},
		{
			file:   "radixtree-host-uri.t TEST 13-14",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Hosts: []string{"*.foo.com"}}},
			probes: []probe{{path: "/hello", host: "www.foo.com", want: 1}},
		},
		{
			file: "radixtree-host-uri2.t TEST 1",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}},
				{Index: 2, URIs: []string{"/server_port"}},
			},
			probes: []probe{{path: "/server_port", host: "test.com", want: 1}},
		},
		{
			file: "radixtree-host-uri2.t TEST 2",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"*.test.com"}},
				{Index: 2, URIs: []string{"/server_port"}},
			},
			probes: []probe{{path: "/server_port", host: "www.test.com", want: 1}},
		},
		{
			file: "radixtree-host-uri2.t TEST 3",
			routes: []Route{
				{Index: 1, URIs: []string{"/*"}, Hosts: []string{"*.test.com"}},
				{Index: 2, URIs: []string{"/server_port"}},
			},
			probes: []probe{{path: "/server_port", host: "www.test.com", want: 1}},
		},
		{
			// filter_func "vars.arg_name == 'json'" written as vars.
			file: "radixtree-host-uri2.t TEST 4-5",
			routes: []Route{
				{Index: 1, URIs: []string{"/*"}, Hosts: []string{"*.test.com"}, Vars: vars(t, `[["arg_name","==","json"]]`)},
				{Index: 2, URIs: []string{"/server_port"}},
			},
			probes: []probe{
				{path: "/server_port", host: "www.test.com", vars: map[string]string{"arg_name": "unknown"}, want: 2},
				{path: "/server_port", host: "www.test.com", vars: map[string]string{"arg_name": "json"}, want: 1},
			},
		},
		{
			file:   "radixtree-host-uri2.t TEST 6-8",
			routes: []Route{{Index: 1, URIs: []string{"/file:listReputationHistories"}}},
			probes: []probe{
				{path: "/file:listReputationHistories", host: "localhost", want: 1},
				{path: "/file:xx", host: "localhost", want: -1},
			},
		},
		{
			file:   "radixtree-host-uri2.t TEST 9-11",
			routes: []Route{{Index: 1, URIs: []string{"/do:listReputationHistories"}, Hosts: []string{"t.com"}}},
			probes: []probe{
				{path: "/do:listReputationHistories", host: "t.com", want: 1},
				{path: "/do:xx", host: "t.com", want: -1},
			},
		},
		{
			file:   "radixtree-host-uri2.t TEST 12",
			routes: []Route{{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}}},
			probes: []probe{{path: "/server_port", host: "tEst.com", want: 1}},
		},
		{
			file:   "radixtree-host-uri2.t TEST 13",
			routes: []Route{{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.coM"}}},
			probes: []probe{{path: "/server_port", host: "test.com", want: 1}},
		},
		{
			// Route 1 inherits hosts ["bar.com"] from its service.
			file: "radixtree-host-uri2.t TEST 14",
			routes: []Route{
				{Index: 1, URIs: []string{"/hello"}, Hosts: []string{"bar.com"}},
				{Index: 2, URIs: []string{"/hello"}, Priority: -1},
			},
			probes: []probe{{path: "/hello", host: "www.foo.com", want: 2}, {path: "/hello", host: "bar.com", want: 1}},
		},
		{
			file: "radixtree-host-uri-priority.t TEST 1",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 1},
				{Index: 2, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 2},
			},
			probes: []probe{{path: "/server_port", host: "test.com", want: 2}},
		},
		{
			file: "radixtree-host-uri-priority.t TEST 2",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 2},
				{Index: 2, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 1},
			},
			probes: []probe{{path: "/server_port", host: "test.com", want: 1}},
		},
		{
			file: "radixtree-host-uri-priority.t TEST 3",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}},
				{Index: 2, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 1},
			},
			probes: []probe{{path: "/server_port", host: "test.com", want: 2}},
		},
		{
			file: "radixtree-host-uri-priority.t TEST 4",
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}, Priority: 1},
				{Index: 2, URIs: []string{"/server_port"}, Hosts: []string{"test.com"}},
			},
			probes: []probe{{path: "/server_port", host: "test.com", want: 1}},
		},
		{
			file:   "radixtree-uri-priority.t TEST 1-2",
			mode:   URI,
			routes: []Route{{Index: 1, URIs: []string{"/server_port*"}, Priority: 2}},
			probes: []probe{{path: "/server_port/aa", want: 1}},
		},
		{
			file: "radixtree-uri-priority.t TEST 3-4",
			mode: URI,
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port*"}, Priority: 2},
				{Index: 2, URIs: []string{"/server_port*"}, Priority: 1},
			},
			probes: []probe{{path: "/server_port/aa", want: 1}},
		},
		{
			file: "radixtree-uri-priority.t TEST 5-6",
			mode: URI,
			routes: []Route{
				{Index: 1, URIs: []string{"/server_port*"}, Priority: 2},
				{Index: 2, URIs: []string{"/server_port*"}, Priority: 3},
			},
			probes: []probe{{path: "/server_port/aa", want: 2}},
		},
		{
			file:   "radixtree-uri-host.t TEST 1-6",
			mode:   URI,
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Hosts: []string{"*.foo.com"}}},
			probes: []probe{
				{path: "/not_found", host: "localhost", want: -1},
				{path: "/hello", host: "localhost", want: -1},
				{path: "/hello", host: "not_found.com", want: -1},
				{path: "/hello", host: "www.foo.com", want: 1},
				{path: "/hello", host: "user.foo.com", want: 1},
			},
		},
		{
			file:   "radixtree-uri-host.t TEST 7-11",
			mode:   URI,
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Hosts: []string{"foo.com"}}},
			probes: []probe{
				{path: "/not_found", host: "localhost", want: -1},
				{path: "/hello", host: "localhost", want: -1},
				{path: "/hello", host: "www.foo.com", want: -1},
				{path: "/hello", host: "foo.com", want: 1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 1-4",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[["http_user_agent","~*","android"]]`)}},
			probes: []probe{
				{path: "/hello", vars: map[string]string{"http_user_agent": "ios"}, want: -1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "android"}, want: 1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "Android"}, want: 1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 5-7",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[["http_user_agent","!","~*","android"]]`)}},
			probes: []probe{
				{path: "/hello", vars: map[string]string{"http_user_agent": "android"}, want: -1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "ios"}, want: 1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 8-10",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[["http_user_agent","IN",["android","ios"]]]`)}},
			probes: []probe{
				{path: "/hello", vars: map[string]string{"http_user_agent": "ios"}, want: 1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "android"}, want: 1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "windows"}, want: -1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 11-13",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[["http_user_agent","==",null]]`)}},
			probes: []probe{
				{path: "/hello", vars: map[string]string{"http_user_agent": "android"}, want: -1},
				{path: "/hello", want: 1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 14-15",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[["http_user_agent","ios"]]`)}},
			probes: []probe{
				{path: "/hello", vars: map[string]string{"http_user_agent": "ios"}, want: 1},
				{path: "/hello", vars: map[string]string{"http_user_agent": "android"}, want: -1},
			},
		},
		{
			file:   "radixtree-uri-vars.t TEST 19-20",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Methods: MethodGET, Vars: vars(t, `[]`)}},
			probes: []probe{{path: "/hello", want: 1}},
		},
		{
			file:   "wildcard-host.t",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, Hosts: []string{"*.foo.com"}}},
			probes: []probe{
				{path: "/not_found", host: "localhost", want: -1},
				{path: "/hello", host: "localhost", want: -1},
				{path: "/hello", host: "a.foo.com", want: 1},
				{path: "/hello", host: "a.b.foo.com", want: 1},
				{path: "/hello", host: ".foo.com", want: 1},
				{path: "/hello", host: "foo.com", want: -1},
			},
		},
		{
			file:   "remote_addrs.t",
			routes: []Route{{Index: 1, URIs: []string{"/hello"}, RemoteAddrs: prefixes(t, "192.0.0.0/8", "127.0.0.3")}},
			probes: []probe{
				{path: "/not_found", addr: local, want: -1},
				{path: "/hello", host: "not_found.com", addr: local, want: -1},
				{path: "/hello", addr: "192.168.1.100", want: 1},
				{path: "/hello", addr: "127.0.0.3", want: 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			for i := range tc.probes {
				if tc.probes[i].addr == "" {
					tc.probes[i].addr = local
				}
			}
			got, want := matchAll(t, mustBuild(t, tc.routes, tc.mode), tc.probes)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("route ids (-want +got):\n%s", diff)
			}
		})
	}
}
