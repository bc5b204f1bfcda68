package packaging

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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

// TestDockerBuild builds the image and checks that its gateway refuses
// nothing in its config.yaml (coregate -t) as its user, where a Docker
// engine answers.
func TestDockerBuild(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers here (docker info: %v: %s): the image is not built; TestDockerfile lints it",
			err, strings.TrimSpace(lastLine(string(out))))
	}
	tag := fmt.Sprintf("coregate-test:%d", time.Now().UnixNano())
	build := exec.Command("docker", "build", "-t", tag, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	out, err := exec.Command("docker", "run", "--rm", "--entrypoint", "/usr/bin/coregate", tag, "-t", "-c", "/etc/coregate/config.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("coregate -t in the image: %v\n%s", err, out)
	}
	out, err = exec.Command("docker", "run", "--rm", "--entrypoint", "/usr/bin/coregate-probe", tag, "http://127.0.0.1:1/").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "probe:") {
		t.Errorf("the probe in the image answered %v for a dead URL:\n%s", err, out)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
