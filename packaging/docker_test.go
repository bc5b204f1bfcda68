package packaging

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// instruction is one Dockerfile instruction: its keyword, upper case, and
// its arguments, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

// parseDockerfile reads path into its instructions, comments and blank
// lines left out.
func parseDockerfile(t testing.TB, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	sc := bufio.NewScanner(f)
	n, cont, start := 0, "", 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || l == "" && cont == "" {
			continue
		}
		if cont == "" {
			start = n
		}
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		l, cont = cont+l, ""
		cmd, args, _ := strings.Cut(l, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// staticBuild is the Makefile's static recipe: its go build command line
// with $(GO) as go and the output path left out, the words of what comes
// before -o and of what follows the output.
func staticBuild(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^static:\n\t(.+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Makefile: no static target with a one-line recipe")
	}
	return withoutOutput(t, strings.ReplaceAll(string(m[1]), "$(GO)", "go"))
}

// withoutOutput is a go build command line with its -o argument removed,
// its words separated by one space.
func withoutOutput(t testing.TB, cmd string) string {
	t.Helper()
	w := strings.Fields(cmd)
	for i := range w {
		if w[i] == "-o" && i+1 < len(w) {
			return strings.Join(append(w[:i:i], w[i+2:]...), " ")
		}
	}
	t.Fatalf("%q: no -o", cmd)
	return ""
}

// TestDockerfile lints the Dockerfile: every base image pinned by a tag
// (not latest) or a digest, the final stage's USER not root, no ADD (of
// URLs above all), a HEALTHCHECK and an EXPOSE in the final stage, every
// path COPY takes from the build context there, and the gateway built
// with the Makefile's static build command.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, "../Dockerfile")
	final := 0
	for i, in := range ins {
		if in.cmd == "FROM" {
			final = i
		}
	}
	var user, health, expose string
	var builds []string
	for i, in := range ins {
		at := fmt.Sprintf("Dockerfile:%d: %s %s", in.line, in.cmd, in.args)
		switch in.cmd {
		case "FROM":
			image := strings.Fields(in.args)[0]
			if tag := image[strings.LastIndexByte(image, '/')+1:]; !strings.Contains(image, "@sha256:") &&
				(!strings.Contains(tag, ":") || strings.HasSuffix(tag, ":latest")) {
				t.Errorf("%s: a base image not pinned by a tag or digest", at)
			}
		case "ADD":
			t.Errorf("%s: ADD (COPY copies; ADD fetches URLs and unpacks archives)", at)
		case "COPY":
			if strings.Contains(in.args, "--from=") {
				continue
			}
			var srcs []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					srcs = append(srcs, w)
				}
			}
			if len(srcs) < 2 {
				t.Errorf("%s: no source and destination", at)
				continue
			}
			for _, src := range srcs[:len(srcs)-1] {
				if m, _ := filepath.Glob(filepath.Join("..", src)); len(m) == 0 {
					t.Errorf("%s: %s is not in the build context", at, src)
				}
			}
		case "RUN":
			for _, part := range strings.Split(in.args, "&&") {
				if strings.Contains(part, "go build") && strings.Contains(part, "./cmd/coregate") {
					builds = append(builds, withoutOutput(t, part))
				}
			}
		}
		if i < final {
			continue
		}
		switch in.cmd {
		case "USER":
			user = in.args
		case "HEALTHCHECK":
			health = in.args
		case "EXPOSE":
			expose = in.args
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("the final stage runs as %q: want a USER not root", user)
	}
	if health == "" || strings.EqualFold(health, "NONE") {
		t.Errorf("the final stage has no HEALTHCHECK")
	} else if m := regexp.MustCompile(`"(/usr/bin/[^"]+)"`).FindStringSubmatch(health); m == nil {
		t.Errorf("HEALTHCHECK %s: not a command of /usr/bin in exec form (the image has no shell)", health)
	}
	if expose == "" {
		t.Errorf("the final stage has no EXPOSE")
	}
	if want := staticBuild(t); len(builds) != 1 || builds[0] != want {
		t.Errorf("the gateway's build in the Dockerfile: %q, want the Makefile's static build %q, once", builds, want)
	}
}

// TestDockerBuild builds the image and runs it, where a Docker engine
// answers: its gateway checks its config.yaml (coregate -t), the container
// turns healthy (the HEALTHCHECK), serves its listener on the published
// port (404 for a path no route takes), and docker stop's SIGTERM ends it
// cleanly.
func TestDockerBuild(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers here (docker info: %v: %s): the image is not built; TestDockerfile lints it",
			err, strings.TrimSpace(lastLine(string(out))))
	}
	docker := func(args ...string) string {
		t.Helper()
		c := exec.Command("docker", args...)
		c.Dir = ".."
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := fmt.Sprintf("coregate-test:%d", time.Now().UnixNano())
	docker("build", "-t", tag, ".")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	docker("run", "--rm", "--entrypoint", "/usr/bin/coregate", tag, "-t", "-c", "/etc/coregate/config.yaml")

	id := docker("run", "-d", "--cap-add", "BPF", "-p", "127.0.0.1::9080", tag)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", id).CombinedOutput()
			t.Logf("the container's output:\n%s", out)
		}
		_ = exec.Command("docker", "rm", "-f", id).Run()
	})
	e2e.Eventually(t, 60*time.Second, func() error {
		if h := docker("inspect", "-f", "{{.State.Health.Status}}", id); h != "healthy" {
			return fmt.Errorf("health %s", h)
		}
		return nil
	})
	addr := docker("port", id, "9080/tcp")
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + lastLine(addr) + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404 (no route)", res.StatusCode)
	}
	docker("stop", "-t", "30", id)
	if code := docker("inspect", "-f", "{{.State.ExitCode}}", id); code != "0" {
		t.Errorf("exit code %s after docker stop, want 0", code)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
