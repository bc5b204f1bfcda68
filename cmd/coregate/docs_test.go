package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"coregate/admin/adminapi"
	"coregate/admin/nodeconf"
	"coregate/admin/standalone"
	"coregate/internal/e2e"
	"coregate/plugins"
)

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file   string // relative to the repository's root
	line   int    // of the opening fence
	lang   string // the fence's info string: sh, yaml, json, ""
	text   string
	notRun string // the reason of a <!-- not run: ... --> just before it
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var notRunMark = regexp.MustCompile(`^<!--\s*not run:\s*(.+?)\s*-->$`)

// docBlocks returns the fenced blocks of README.md and every Markdown file
// under docs/.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("../../docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, strings.TrimPrefix(path, "../../"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		var cur *docBlock
		prev := ""
		for i, l := range strings.Split(string(data), "\n") {
			switch {
			case cur == nil && strings.HasPrefix(l, "```"):
				cur = &docBlock{file: f, line: i + 1, lang: strings.TrimSpace(l[3:])}
				if m := notRunMark.FindStringSubmatch(prev); m != nil {
					cur.notRun = m[1]
				}
			case cur != nil && strings.HasPrefix(l, "```"):
				blocks = append(blocks, *cur)
				cur = nil
			case cur != nil:
				cur.text += l + "\n"
			}
			if strings.TrimSpace(l) != "" {
				prev = strings.TrimSpace(l)
			}
		}
		if cur != nil {
			t.Errorf("%s: the block is not closed", cur)
		}
	}
	return blocks
}

// Top-level keys of a config.yaml and of an apisix.yaml.
var (
	configKeys     = []string{"apisix", "deployment", "nginx_config", "plugin_attr", "plugins", "discovery", "graphql", "ext-plugin", "wasm", "xrpc", "stream_plugins"}
	standaloneKeys = []string{"routes", "services", "upstreams", "consumers", "consumer_groups", "plugin_configs", "global_rules", "plugin_metadata", "ssls", "secrets", "protos", "stream_routes"}
)

// TestDocExamples runs the examples of README.md and docs/: every YAML
// block is parsed and loaded as the node loads it (a config.yaml by
// nodeconf, an apisix.yaml, #END added where a fragment lacks it, by the
// standalone loader with the plugins' checks); every shell block (sh,
// shell, bash, or no language with a line starting with curl) runs
// under bash -e against a gateway this test starts (embedded etcd, the
// legacy Admin API key, the route /hello of `make run`), 9080, 9180, 9090,
// 1980 and 1981 replaced by its ports, its upstream's and a dead one. Each
// curl must exit 0, and where its line ends with a comment starting with a
// status ("# 404 …"), answer that status. A block that cannot run is
// marked "<!-- not run: reason -->" just before it; the test fails on a
// block it cannot run without one.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	blocks := docBlocks(t)
	var g *docGateway
	var ran, yamls, marked int
	for _, b := range blocks {
		if b.notRun != "" {
			marked++
			continue
		}
		switch b.lang {
		case "yaml", "yml":
			checkDocYAML(t, b)
			yamls++
		case "sh", "shell", "bash", "":
			if b.lang == "" && !looksLikeShell(b.text) {
				continue // a diagram, or an answer shown as it comes
			}
			if g == nil {
				g = startDocGateway(t)
			}
			g.run(t, b)
			ran++
		}
	}
	t.Logf("%d blocks: %d shell blocks run, %d YAML blocks loaded, %d marked not run", len(blocks), ran, yamls, marked)
	if ran < 5 || yamls < 4 || marked < 2 {
		t.Errorf("ran %d shell blocks, loaded %d YAML blocks and skipped %d marked ones: the docs have more", ran, yamls, marked)
	}
}

// checkDocYAML parses b and loads it as a config.yaml or an apisix.yaml,
// whichever its top-level keys are.
func checkDocYAML(t *testing.T, b docBlock) {
	t.Helper()
	var top map[string]any
	if err := yaml.Unmarshal([]byte(b.text), &top); err != nil {
		t.Errorf("%s: %v", b, err)
		return
	}
	kind := ""
	for k := range top {
		this := ""
		switch {
		case slices.Contains(configKeys, k):
			this = "config.yaml"
		case slices.Contains(standaloneKeys, k):
			this = "apisix.yaml"
		default:
			t.Errorf("%s: top-level key %q is neither config.yaml's nor apisix.yaml's", b, k)
			return
		}
		if kind != "" && kind != this {
			t.Errorf("%s: mixes config.yaml's and apisix.yaml's keys", b)
			return
		}
		kind = this
	}
	path := filepath.Join(t.TempDir(), kind)
	switch kind {
	case "config.yaml":
		if _, warns, err := nodeconf.Parse([]byte(b.text), path); err != nil || len(warns) > 0 {
			t.Errorf("%s: as config.yaml: %v %q", b, err, warns)
		}
	case "apisix.yaml":
		text := b.text
		if !strings.Contains(text, "#END") {
			text += "#END\n"
		}
		e2e.WriteFile(t, path, text)
		if err := standalone.CheckFile(path, plugins.Default); err != nil {
			t.Errorf("%s: as apisix.yaml: %v", b, err)
		}
	default:
		t.Errorf("%s: an empty YAML block", b)
	}
}

// looksLikeShell tells whether a block without a language runs commands:
// a line of it starts with curl.
func looksLikeShell(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "curl ") {
			return true
		}
	}
	return false
}

// docGateway is the node the shell examples run against, and the ports
// that stand for the documented ones.
type docGateway struct {
	g                *supGateway
	ports            *strings.Replacer
	proxy, adminPort int
}

func startDocGateway(t *testing.T) *docGateway {
	t.Helper()
	up := textUpstream(t, strings.Repeat("1234567890", 102)+"1234")
	adminPort, controlPort := freePort(t), freePort(t)
	config := func(port int) string {
		return strings.Replace(etcdConfig(adminPort, adminapi.LegacyAdminKey)(port), "  enable_control: false\n",
			"  enable_control: true\n  control:\n    ip: 127.0.0.1\n    port: "+strconv.Itoa(controlPort)+"\n", 1)
	}
	g := startSupervisor(t, "", config, 1)
	admin := legacyAdmin(adminPort)
	c := newClient(t)
	// The route make run puts.
	if r := admin.do(t, c, "PUT", "routes/1", fmt.Sprintf(`{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT routes/1: %d %s", r.status, r.body)
	}
	e2e.Eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("/hello: %d", r.status)
		}
		return nil
	})
	_, upPort, _ := strings.Cut(up.Addr(), ":")
	_, deadPort, _ := strings.Cut(e2e.DeadAddr(t), ":")
	return &docGateway{g: g, proxy: g.port, adminPort: adminPort, ports: strings.NewReplacer(
		"9080", strconv.Itoa(g.port), "9180", strconv.Itoa(adminPort), "9090", strconv.Itoa(controlPort),
		"1980", upPort, "1981", deadPort)}
}

// docCurl is bash's curl in the examples: the real one, recording the
// line it was called from and the status of its last answer. A change
// made through the Admin API is live on the workers within milliseconds,
// not at once, as a reader typing the next command finds it: after a
// write to the Admin API, a 404 of the proxy is asked again, for up to
// 3 s, before it counts.
const docCurl = `curl() {
	local n=$((${#DOC_CALLS[@]} + 1)) rc=0 try=0 status
	while :; do
		rc=0
		command curl -D "$DOC_DIR/head.$n" "$@" || rc=$?
		status=$(head -n 1 "$DOC_DIR/head.$n" 2>/dev/null | cut -d ' ' -f 2)
		if [ "$status" = 404 ] && [ "$DOC_WROTE" = 1 ] && [[ " $* " == *":$DOC_PROXY/"* ]] && [ $try -lt 30 ]; then
			try=$((try + 1))
			sleep 0.1
			continue
		fi
		break
	done
	case " $* " in *":$DOC_ADMIN/"*) case " $* " in *" -X "*|*" -d "*|*" --data"*) DOC_WROTE=1 ;; esac ;; esac
	DOC_CALLS+=("$n")
	echo "${BASH_LINENO[0]} $rc $status" >>"$DOC_DIR/calls"
	return $rc
}
DOC_CALLS=()
admin_key=` + adminapi.LegacyAdminKey + `
`

var statusComment = regexp.MustCompile(`#\s*([1-5][0-9][0-9])\b`)

// run runs block b under bash -e -o pipefail, with a 30 s bound, and
// checks every curl it ran.
func (g *docGateway) run(t *testing.T, b docBlock) {
	t.Helper()
	dir := t.TempDir()
	script := g.ports.Replace(b.text)
	e2e.WriteFile(t, filepath.Join(dir, "prelude.sh"), docCurl)
	e2e.WriteFile(t, filepath.Join(dir, "block.sh"), script)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--norc", "-e", "-o", "pipefail", filepath.Join(dir, "block.sh"))
	cmd.Dir = dir
	// A curl still running when bash is killed holds the output pipe:
	// stop waiting for it too.
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "BASH_ENV="+filepath.Join(dir, "prelude.sh"), "DOC_DIR="+dir,
		"DOC_PROXY="+strconv.Itoa(g.proxy), "DOC_ADMIN="+strconv.Itoa(g.adminPort))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v\n%s\n%s", b, err, script, out)
		return
	}
	f, err := os.Open(filepath.Join(dir, "calls"))
	if err != nil {
		t.Errorf("%s: ran no curl (mark it <!-- not run: why --> if it cannot run): %v\n%s", b, err, out)
		return
	}
	defer f.Close()
	lines := strings.Split(b.text, "\n")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line, rc int
		var status string
		fields := strings.Fields(sc.Text())
		line, _ = strconv.Atoi(fields[0])
		rc, _ = strconv.Atoi(fields[1])
		if len(fields) > 2 {
			status = fields[2]
		}
		if rc != 0 {
			t.Errorf("%s: the curl of line %d exited %d", b, b.line+line, rc)
		}
		// The status the doc says: a comment on the curl's first line.
		for i := min(line, len(lines)) - 1; i >= 0; i-- {
			if !strings.Contains(lines[i], "curl ") {
				continue
			}
			if m := statusComment.FindStringSubmatch(lines[i]); m != nil && m[1] != status {
				t.Errorf("%s: the curl of line %d answered %q, the doc says %s\n%s", b, b.line+i+1, status, m[1], out)
			}
			break
		}
	}
}
