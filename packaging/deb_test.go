package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// dpkgDeb runs dpkg-deb with args, failing t when it fails.
func dpkgDeb(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDeb builds the .deb (make deb) and checks its control fields,
// conffiles, maintainer scripts and files (modes, owners, the unit as
// packaging/ has it). Where COREGATE_TEST_DPKG=1 or CI=true (a throwaway
// machine, as root) it installs the package on this machine with dpkg -i,
// runs the installed unit as its coregate user as TestMakeInstall does,
// and purges the package.
func TestDeb(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		missing(t, "dpkg-deb not installed")
	}
	bin := t.TempDir()
	makeIn(t, "deb", "BIN="+bin, "VERSION=1.2.3+test")
	deb := filepath.Join(bin, "coregate_1.2.3+test_"+runtime.GOARCH+".deb")

	fields := dpkgDeb(t, "-f", deb, "Package", "Version", "Architecture", "Depends")
	for _, want := range []string{"Package: coregate\n", "Version: 1.2.3+test\n", "Architecture: " + runtime.GOARCH + "\n", "Depends: adduser\n"} {
		if !strings.Contains(fields, want) {
			t.Errorf("control: no %q in\n%s", want, fields)
		}
	}
	ctrl := t.TempDir()
	dpkgDeb(t, "-e", deb, ctrl)
	if b, _ := os.ReadFile(filepath.Join(ctrl, "conffiles")); string(b) != "/etc/coregate/apisix.yaml\n/etc/coregate/config.yaml\n" {
		t.Errorf("conffiles:\n%s", b)
	}
	for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
		got, err := os.ReadFile(filepath.Join(ctrl, s))
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		want, _ := os.ReadFile(filepath.Join("deb", s))
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not packaging/deb/%s", s, s)
		}
		if fi, _ := os.Stat(filepath.Join(ctrl, s)); fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v", s, fi.Mode())
		}
		if out, err := exec.Command("sh", "-n", filepath.Join(ctrl, s)).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", s, err, out)
		}
	}

	// Each file: mode, owner/group, path (dpkg-deb -c's columns 1, 2, 6).
	listing := map[string]string{}
	for l := range strings.Lines(dpkgDeb(t, "-c", deb)) {
		f := strings.Fields(l)
		if len(f) >= 6 {
			listing[strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")] = f[0] + " " + f[1]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/coregate":                        "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/coregate.service": "-rw-r--r-- root/root",
		"/etc/coregate":                            "drwxrwx--T root/coregate",
		"/etc/coregate/config.yaml":                "-rw-r----- root/coregate",
		"/etc/coregate/apisix.yaml":                "-rw-r----- root/coregate",
	} {
		if listing[path] != want {
			t.Errorf("%s: %q, want %q", path, listing[path], want)
		}
	}
	root := t.TempDir()
	dpkgDeb(t, "-x", deb, root)
	got, _ := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/coregate.service"))
	want, _ := os.ReadFile("coregate.service")
	if !bytes.Equal(got, want) {
		t.Errorf("the packaged unit is not packaging/coregate.service")
	}
	verifyUnit(t, filepath.Join(root, "usr/lib/systemd/system/coregate.service"),
		"/usr/bin/coregate", filepath.Join(root, "usr/bin/coregate"))

	if os.Getenv("COREGATE_TEST_DPKG") != "1" && os.Getenv("CI") != "true" {
		t.Log("not installed: dpkg -i changes this machine (COREGATE_TEST_DPKG=1 or CI=true, as root, installs, runs and purges it)")
		return
	}
	needRoot(t)
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "coregate").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skip("a coregate package is installed on this machine already: not replaced")
	}
	dpkg := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("dpkg", args...).CombinedOutput(); err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	purged := false
	t.Cleanup(func() {
		if !purged {
			_ = exec.Command("dpkg", "--purge", "coregate").Run()
		}
	})
	dpkg("-i", deb)
	unitFile := parseUnit(t, "/usr/lib/systemd/system/coregate.service")
	u, err := user.Lookup(unitFile.one(t, "User"))
	if err != nil {
		t.Fatalf("preinst made no user for the unit's User=: %v", err)
	}
	if g, err := user.LookupGroupId(u.Gid); err != nil || g.Name != unitFile.one(t, "Group") {
		t.Errorf("the user's group is %v (%v), not the unit's Group=%s", g, err, unitFile.one(t, "Group"))
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	checkMode(t, "/etc/coregate", 0o770|os.ModeSticky, gid)
	checkMode(t, "/etc/coregate/config.yaml", 0o640, gid)
	runUnit(t, unitFile, uid, gid, "/etc/coregate", "/var/lib/coregate")

	// Installed again (an upgrade), the package keeps the config.yaml
	// that runUnit edited: a conffile.
	edited, err := os.ReadFile("/etc/coregate/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dpkg("-i", deb)
	if b, _ := os.ReadFile("/etc/coregate/config.yaml"); !bytes.Equal(b, edited) {
		t.Errorf("dpkg -i again replaced the edited config.yaml")
	}
	checkMode(t, "/etc/coregate", 0o770|os.ModeSticky, gid)

	dpkg("--purge", "coregate")
	purged = true
	for _, p := range []string{"/usr/bin/coregate", "/usr/lib/systemd/system/coregate.service", "/etc/coregate", "/var/lib/coregate"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after dpkg --purge", p)
		}
	}
}
