package adminapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

// listIDs returns the ids of a list answer, in order, and its total.
func listIDs(t *testing.T, r response) ([]string, int) {
	t.Helper()
	m := r.json(t)
	total, _ := m["total"].(json.Number).Int64()
	var ids []string
	for _, it := range m["list"].([]any) {
		e := it.(map[string]any)
		if e["createdIndex"] == nil || e["modifiedIndex"] == nil || e["key"] == nil {
			t.Fatalf("list item %v", e)
		}
		id, _ := idText(e["value"].(map[string]any)["id"])
		ids = append(ids, id)
	}
	return ids, int(total)
}

func TestList(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("GET", "/apisix/admin/routes", ""), 200, `{"list":[],"total":0}`)
	for i := 1; i <= 25; i++ {
		body := fmt.Sprintf(`{"uri":"/r%d","name":"route-%d","upstream":%s}`, i, i, upstream1)
		if i%5 == 0 {
			body = fmt.Sprintf(`{"uris":["/x","/five/%d"],"labels":{"five":"yes"},"upstream":%s}`, i, upstream1)
		}
		// Ids that sort apart from their creation order.
		c.want(c.do("PUT", fmt.Sprintf("/apisix/admin/routes/%d", 100-i), body), 201, "")
	}
	ids, total := listIDs(t, c.do("GET", "/apisix/admin/routes", ""))
	if total != 25 || len(ids) != 25 || ids[0] != "99" || ids[24] != "75" {
		t.Fatalf("list %v total %d", ids, total)
	}

	// Paging, in creation order, only with both arguments.
	ids, total = listIDs(t, c.do("GET", "/apisix/admin/routes?page=2&page_size=10", ""))
	if total != 25 || len(ids) != 10 || ids[0] != "89" {
		t.Fatalf("page 2: %v %d", ids, total)
	}
	ids, _ = listIDs(t, c.do("GET", "/apisix/admin/routes?page=3&page_size=10", ""))
	if len(ids) != 5 || ids[4] != "75" {
		t.Fatalf("page 3: %v", ids)
	}
	ids, _ = listIDs(t, c.do("GET", "/apisix/admin/routes?page=4&page_size=10", ""))
	if len(ids) != 0 {
		t.Fatalf("page 4: %v", ids)
	}
	ids, _ = listIDs(t, c.do("GET", "/apisix/admin/routes?page=0&page_size=10", ""))
	if len(ids) != 10 || ids[0] != "99" {
		t.Fatalf("page 0: %v", ids)
	}
	ids, _ = listIDs(t, c.do("GET", "/apisix/admin/routes?page_size=10", ""))
	if len(ids) != 25 {
		t.Fatalf("page_size alone: %d", len(ids))
	}
	for _, q := range []string{"page=1&page_size=9", "page=1&page_size=501"} {
		r := c.do("GET", "/apisix/admin/routes?"+q, "")
		if r.status != 400 || string(r.body) != "page_size must be between 10 and 500" {
			t.Fatalf("%s: %d %q", q, r.status, r.body)
		}
	}

	// Filters; total counts what they keep.
	for _, tc := range []struct {
		q     string
		total int
	}{
		{"name=" + url.QueryEscape("^route-1"), 9}, // 1 and 11..19 but 15
		{"name=route-2[0-4]", 4},
		{"name=(", 0},
		{"label=five", 5},
		{"label=six", 0},
		{"uri=" + url.QueryEscape("^/five/"), 5},
		{"uri=" + url.QueryEscape("^/r2"), 5},
		{"uri=" + url.QueryEscape("^/r2") + "&name=4", 1},
		{"label=five&page=1&page_size=10", 5},
	} {
		if _, total := listIDs(t, c.do("GET", "/apisix/admin/routes?"+tc.q, "")); total != tc.total {
			t.Errorf("%s: total %d, want %d", tc.q, total, tc.total)
		}
	}
}

func TestListFilterField(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", upstream1), 201, "")
	c.want(c.do("PUT", "/apisix/admin/upstreams/2", upstream1), 201, "")
	c.want(c.do("PUT", "/apisix/admin/services/s", `{"upstream_id":1}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/a", `{"uri":"/a","upstream_id":1}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/b", `{"uri":"/b","upstream_id":"2"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/c", `{"uri":"/c","service_id":"s"}`), 201, "")
	for _, tc := range []struct {
		filter string
		ids    string
	}{
		{"upstream_id=1", "[a]"},
		{"upstream_id=2", "[b]"},
		{"service_id=s", "[c]"},
		{"service_id=s&upstream_id=1", "[]"},
		{"upstream_id=1&upstream_id=2", "[b]"},
		{"desc=x", "[a b c]"}, // not a filter field of routes: ignored
	} {
		ids, total := listIDs(t, c.do("GET", "/apisix/admin/routes?filter="+url.QueryEscape(tc.filter), ""))
		if fmt.Sprint(ids) != tc.ids && !(tc.ids == "[]" && len(ids) == 0) || total != len(ids) {
			t.Errorf("filter %s: %v (total %d), want %s", tc.filter, ids, total, tc.ids)
		}
	}
}
