package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "coregate"

// pkg is what the test reads of one `go list -json` package.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// rule is one import rule: the packages it constrains (applies) and the
// imports it allows them, directly or through other packages of the module.
type rule struct {
	name    string
	applies func(importer string) bool
	allows  func(imported string, std bool) bool
	// module: the rule constrains imports of this module's packages only,
	// so it holds for test files too (tests may import go-cmp, but not
	// worker/ from a plugin); rules about the standard library or third
	// parties hold for the code that is built, not for its tests.
	module bool
}

func under(p, dir string) bool {
	dir = module + "/" + dir
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// configModel is the config model: the resource objects, config.yaml and
// its data_encryption keyring.
func configModel(p string) bool {
	return p == module+"/admin/spec" || p == module+"/admin/nodeconf" || p == module+"/admin/keyring"
}

var rules = []rule{
	{
		name:    "httpparse imports only the standard library",
		applies: func(p string) bool { return under(p, "httpparse") },
		allows:  func(d string, std bool) bool { return std },
	},
	{
		name: "the config model (admin/spec, admin/nodeconf, admin/keyring) imports only the standard library, " +
			"go.yaml.in/yaml/v3, github.com/santhosh-tekuri/jsonschema/v6, internal/jsonesc and itself",
		applies: configModel,
		allows: func(d string, std bool) bool {
			return std || configModel(d) || d == module+"/internal/jsonesc" ||
				d == "go.yaml.in/yaml/v3" || strings.HasPrefix(d, "go.yaml.in/yaml/v3/") ||
				d == "github.com/santhosh-tekuri/jsonschema/v6" ||
				strings.HasPrefix(d, "github.com/santhosh-tekuri/jsonschema/v6/")
		},
	},
	{
		name:    "plugins/... imports nothing of worker/...",
		applies: func(p string) bool { return under(p, "plugins") },
		allows:  func(d string, std bool) bool { return !under(d, "worker") },
		module:  true,
	},
	{
		name:    "plugins/... imports nothing of admin/... but the config model (admin/spec, admin/nodeconf, admin/keyring)",
		applies: func(p string) bool { return under(p, "plugins") },
		allows:  func(d string, std bool) bool { return !under(d, "admin") || configModel(d) },
		module:  true,
	},
	{
		name:    "worker/... imports nothing of admin/... but the config model (admin/spec, admin/nodeconf, admin/keyring)",
		applies: func(p string) bool { return under(p, "worker") },
		allows:  func(d string, std bool) bool { return !under(d, "admin") || configModel(d) },
		module:  true,
	},
	{
		// node/ holds the processes (the supervisor, the worker process),
		// which put the event loop, the configuration and the plugins
		// together; what they put together does not reach back.
		name:    "nothing outside cmd/... and node/... imports node/...",
		applies: func(p string) bool { return !under(p, "cmd") && !under(p, "node") },
		allows:  func(d string, std bool) bool { return !under(d, "node") },
		module:  true,
	},
	{
		name:    "internal/jsonesc and httpvar import only the standard library",
		applies: func(p string) bool { return under(p, "internal/jsonesc") || under(p, "httpvar") },
		allows:  func(d string, std bool) bool { return std },
	},
	{
		// Not module: the rule is about the code that is built; tests
		// import the harness, that is what it is for.
		name:    "only tests import internal/e2e (the end-to-end harness)",
		applies: func(p string) bool { return !under(p, "internal/e2e") },
		allows:  func(d string, std bool) bool { return !under(d, "internal/e2e") },
	},
	{
		name:    "tlsrec imports only the standard library and golang.org/x/crypto",
		applies: func(p string) bool { return under(p, "tlsrec") },
		allows: func(d string, std bool) bool {
			return std || strings.HasPrefix(d, "golang.org/x/crypto/") || under(d, "tlsrec")
		},
	},
	{
		// The TLS configuration is a leaf beside the model: the worker
		// and the Admin API's checks use it, it uses neither.
		name:    "tlsconf imports nothing of worker/..., node/..., plugins/... and nothing of admin/... but the config model",
		applies: func(p string) bool { return under(p, "tlsconf") },
		allows: func(d string, std bool) bool {
			return !under(d, "worker") && !under(d, "node") && !under(d, "plugins") && (!under(d, "admin") || configModel(d))
		},
		module: true,
	},
	{
		// The supervisor's storesync and the worker both measure by it,
		// and neither may import the other.
		name:    "internal/threadcpu imports only the standard library and golang.org/x/sys/unix",
		applies: func(p string) bool { return under(p, "internal/threadcpu") },
		allows:  func(d string, std bool) bool { return std || d == "golang.org/x/sys/unix" },
	},
	{
		// The supervisor's delta encoding and health bookkeeping and the
		// worker's build compare pointer lists by it.
		name:    "internal/ptrlist imports only the standard library",
		applies: func(p string) bool { return under(p, "internal/ptrlist") },
		allows:  func(d string, std bool) bool { return std },
	},
}

// direct rules hold for every package's own imports (no path to follow:
// every package is checked).
var direct = []rule{
	{
		name:    "nothing imports cmd/...",
		applies: func(p string) bool { return strings.HasPrefix(p, module+"/") },
		allows:  func(d string, std bool) bool { return !under(d, "cmd") },
		module:  true,
	},
	{
		name:    "nothing outside bench/ imports bench/...",
		applies: func(p string) bool { return !under(p, "bench") },
		allows:  func(d string, std bool) bool { return !under(d, "bench") },
		module:  true,
	},
}

func TestImportRules(t *testing.T) {
	pkgs := loadPackages(t)
	if len(pkgs) == 0 || pkgs[module+"/httpparse"] == nil || pkgs[module+"/worker"] == nil {
		t.Fatalf("go list found %d packages, not the module's", len(pkgs))
	}
	for _, msg := range check(pkgs) {
		t.Error(msg)
	}
}

// check returns one message per broken rule and offending import.
func check(pkgs map[string]*pkg) []string {
	var paths []string
	for p := range pkgs {
		if strings.HasPrefix(p, module+"/") {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	// One message per rule and offending import, from the package that
	// makes it (the shortest path) when several lead to it.
	type found struct {
		root  string
		chain []string
		test  bool
	}
	best := map[string]found{}
	var keys []string
	report := func(r *rule, root string, chain []string, test bool) {
		key := r.name + "\x00" + chain[len(chain)-2] + "\x00" + chain[len(chain)-1]
		if f, ok := best[key]; ok && len(f.chain) <= len(chain) {
			return
		} else if !ok {
			keys = append(keys, key)
		}
		best[key] = found{root, chain, test}
	}
	for _, p := range paths {
		for i := range rules {
			r := &rules[i]
			if !r.applies(p) {
				continue
			}
			if chain := offending(pkgs, r, []string{p}, pkgs[p].Imports); chain != nil {
				report(r, p, chain, false)
			}
			if r.module {
				if chain := offending(pkgs, r, []string{p}, testImports(pkgs[p])); chain != nil {
					report(r, p, chain, true)
				}
			}
		}
		for i := range direct {
			r := &direct[i]
			if !r.applies(p) {
				continue
			}
			for _, d := range pkgs[p].Imports {
				if !r.allows(d, isStd(pkgs, d)) {
					report(r, p, []string{p, d}, false)
				}
			}
			for _, d := range testImports(pkgs[p]) {
				if !r.allows(d, isStd(pkgs, d)) {
					report(r, p, []string{p, d}, true)
				}
			}
		}
	}
	var out []string
	for _, key := range keys {
		f := best[key]
		name, _, _ := strings.Cut(key, "\x00")
		what := f.root
		if f.test {
			what += " (its tests)"
		}
		msg := what + " imports " + f.chain[len(f.chain)-1]
		if len(f.chain) > 2 || f.test {
			msg += " through " + strings.Join(f.chain, " → ")
		}
		out = append(out, msg+": breaks the rule \""+name+"\"")
	}
	return out
}

// offending walks the module's packages reachable from chain's last
// package through imports (breadth first, so the shortest path comes
// back) and returns the first import r does not allow, as the chain of
// packages leading to it; nil when every import is allowed. Packages
// outside the module are not entered: what a third-party package imports
// is its own business, and it cannot import this module.
func offending(pkgs map[string]*pkg, r *rule, chain, imports []string) []string {
	type item struct {
		chain   []string
		imports []string
	}
	queue := []item{{chain, imports}}
	visited := map[string]bool{chain[len(chain)-1]: true}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		for _, d := range it.imports {
			next := append(append([]string(nil), it.chain...), d)
			if !r.allows(d, isStd(pkgs, d)) {
				return next
			}
			if visited[d] || !strings.HasPrefix(d, module+"/") || pkgs[d] == nil {
				continue
			}
			visited[d] = true
			queue = append(queue, item{next, pkgs[d].Imports})
		}
	}
	return nil
}

func testImports(p *pkg) []string {
	var out []string
	for _, d := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
		if d != p.ImportPath && strings.HasPrefix(d, module+"/") {
			out = append(out, d)
		}
	}
	return out
}

func isStd(pkgs map[string]*pkg, path string) bool {
	if p := pkgs[path]; p != nil {
		return p.Standard
	}
	// Imported only by tests, so not listed: the standard library's paths
	// have no dot in their first element.
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != module
}

// loadPackages runs `go list -deps -json ./...` at the module's root.
func loadPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	gomod, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command(goBin, "list", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./...: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list output: %v", err)
		}
		pkgs[p.ImportPath] = &p
	}
	return pkgs
}

// TestImportRulesCatch runs the rules on a made-up graph that breaks each
// of them, so that a rule that stopped catching anything fails here.
func TestImportRulesCatch(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := map[string]*pkg{}
	add := func(path string, std bool, imports ...string) {
		pkgs[path] = &pkg{ImportPath: path, Standard: std, Imports: imports}
	}
	add("fmt", true)
	add("golang.org/x/sys/unix", false)
	add("go.yaml.in/yaml/v3", false, "fmt")
	add(m("httpparse"), false, "fmt", "golang.org/x/sys/unix")
	add(m("admin/spec"), false, "fmt", "go.yaml.in/yaml/v3")
	add(m("admin/nodeconf"), false, m("admin/spec"), m("bpf"))
	add(m("admin/standalone"), false, m("admin/spec"))
	add(m("bpf"), false, "golang.org/x/sys/unix")
	add(m("worker/router"), false, m("admin/spec"), m("cmd/coregate"))
	add(m("worker"), false, m("worker/router"), m("admin/standalone"))
	add(m("plugins/keyauth"), false, m("bench/hdr"))
	add(m("plugins"), false, m("admin/nodeconf"), m("worker/router"))
	add(m("bench/hdr"), false, "fmt")
	add(m("bench/load"), false, m("bench/hdr"))
	add(m("cmd/coregate"), false, m("worker"))
	add(m("internal/jsonesc"), false, "fmt", "golang.org/x/sys/unix")
	add(m("httpvar"), false, m("httpparse"))
	add(m("internal/e2e"), false, "fmt")
	add(m("admin/adminapi"), false, m("internal/e2e"))
	add(m("node/supervisor"), false, "fmt")
	add(m("plugins/mocking"), false, m("node/supervisor"))
	add(m("tlsrec"), false, "golang.org/x/sys/unix")
	add(m("tlsconf"), false, m("worker/router"))
	add(m("internal/threadcpu"), false, "golang.org/x/sys/unix", m("worker"))
	pkgs[m("plugins")].TestImports = []string{m("admin/standalone")}
	pkgs[m("cmd/coregate")].TestImports = []string{m("internal/e2e")} // allowed

	got := check(pkgs)
	want := []string{
		m("admin/adminapi") + " imports coregate/internal/e2e: breaks the rule \"" + rules[7].name + "\"",
		m("admin/nodeconf") + " imports coregate/bpf: breaks the rule \"" + rules[1].name + "\"",
		m("httpparse") + " imports golang.org/x/sys/unix: breaks the rule \"" + rules[0].name + "\"",
		m("plugins") + " imports coregate/worker/router: breaks the rule \"" + rules[2].name + "\"",
		m("plugins") + " imports coregate/admin/standalone through coregate/plugins → coregate/worker/router → coregate/cmd/coregate → coregate/worker → coregate/admin/standalone: breaks the rule \"" + rules[3].name + "\"",
		m("plugins") + " (its tests) imports coregate/admin/standalone through coregate/plugins → coregate/admin/standalone: breaks the rule \"" + rules[3].name + "\"",
		m("plugins/mocking") + " imports coregate/node/supervisor: breaks the rule \"" + rules[5].name + "\"",
		m("plugins/keyauth") + " imports coregate/bench/hdr: breaks the rule \"" + direct[1].name + "\"",
		m("worker") + " imports coregate/admin/standalone: breaks the rule \"" + rules[4].name + "\"",
		m("worker/router") + " imports coregate/cmd/coregate: breaks the rule \"" + direct[0].name + "\"",
		m("internal/jsonesc") + " imports golang.org/x/sys/unix: breaks the rule \"" + rules[6].name + "\"",
		m("httpvar") + " imports coregate/httpparse: breaks the rule \"" + rules[6].name + "\"",
		m("tlsrec") + " imports golang.org/x/sys/unix: breaks the rule \"" + rules[8].name + "\"",
		m("tlsconf") + " imports coregate/worker/router: breaks the rule \"" + rules[9].name + "\"",
		m("internal/threadcpu") + " imports coregate/worker: breaks the rule \"" + rules[10].name + "\"",
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
