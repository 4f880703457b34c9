package htgs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInstallCUDAHeadersNamesNoHost checks that the script takes its apt
// mirror from the machine instead of naming one.
func TestInstallCUDAHeadersNamesNoHost(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("scripts", "install-cuda-headers.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)[a-z+]+://[^\s"']+|deb\.debian\.org|\bmirror\.[a-z0-9.-]+`).Find(src); m != nil {
		t.Errorf("scripts/install-cuda-headers.sh names a host: %q", m)
	}
}

// TestInstallCUDAHeadersUsesMachineMirror runs the script's --print-sources
// mode on a fake apt configuration: the sources file it would write must
// use the fake mirrors, with the same suites and keys, and add only the
// components missing from the distribution's own entries. apt-get and sudo
// are replaced by stubs that record being called; they must not be.
func TestInstallCUDAHeadersUsesMachineMirror(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk:", err)
	}
	script, err := filepath.Abs(filepath.Join("scripts", "install-cuda-headers.sh"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sources.list.d")
	stubs := filepath.Join(tmp, "bin")
	called := filepath.Join(tmp, "called")
	files := map[string]string{
		// The distribution's deb822 file, in the Debian image's form.
		"sources.list.d/debian.sources": `Types: deb deb-src
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.test.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test.invalid/debian-security
Suites: bookworm-security
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test.invalid/debian
Suites: bookworm-backports
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF...
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://disabled.test.invalid/debian
Suites: bookworm
Components: main
Enabled: no
`,
		// A third-party repository: not this release, left alone.
		"sources.list.d/nodesource.sources": `Types: deb
URIs: https://thirdparty.test.invalid/node_20.x
Suites: nodistro
Components: main
`,
		// A stale copy of the script's own file is not read back.
		"sources.list.d/htgs-nonfree.sources": `Types: deb
URIs: http://stale.test.invalid/debian
Suites: bookworm
Components: main
`,
		// Files apt does not read.
		"sources.list.d/old.list.disabled": "deb http://ignored.test.invalid/debian bookworm main\n",
		// One-line entries.
		"sources.list": `# deb http://commented.test.invalid/debian bookworm main
deb [arch=amd64 signed-by=/etc/apt/keyrings/mirror.gpg] http://mirror2.test.invalid/debian bookworm main non-free-firmware
deb-src http://src.test.invalid/debian bookworm main
deb http://mirror2.test.invalid/debian bookworm-updates main contrib non-free non-free-firmware
`,
		"os-release":  "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\n",
		"bin/apt-get": "#!/bin/sh\necho apt-get \"$@\" >> " + called + "\nexit 1\n",
		"bin/sudo":    "#!/bin/sh\necho sudo \"$@\" >> " + called + "\nexit 1\n",
	}
	for name, content := range files {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "DEB_CODENAME" && k != "HTGS_SOURCES_FILE" && k != "PATH" {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"),
		"APT_SOURCES_DIR="+dir, "APT_SOURCES_LIST="+filepath.Join(tmp, "sources.list"),
		"OS_RELEASE="+filepath.Join(tmp, "os-release"),
		// Where the script would write, should it ever write in this mode.
		"HTGS_SOURCES_FILE="+filepath.Join(tmp, "written.sources"))
	cmd := exec.Command(bash, script, "--print-sources")
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("install-cuda-headers.sh --print-sources: %v\n%s", err, errOut.String())
	}
	if b, err := os.ReadFile(called); err == nil {
		t.Errorf("--print-sources ran %s", b)
	}
	if _, err := os.Stat(filepath.Join(tmp, "written.sources")); err == nil {
		t.Error("--print-sources wrote the sources file")
	}
	want := `# Added by htgs scripts/install-cuda-headers.sh: the contrib non-free non-free-firmware components
# of this machine's own Debian bookworm sources, for the CUDA headers and nvcc.

Types: deb
URIs: http://mirror.test.invalid/debian
Suites: bookworm bookworm-updates
Components: contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test.invalid/debian-security
Suites: bookworm-security
Components: non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.test.invalid/debian
Suites: bookworm-backports
Components: contrib non-free non-free-firmware

Types: deb
URIs: http://mirror2.test.invalid/debian
Suites: bookworm
Components: contrib non-free
Signed-By: /etc/apt/keyrings/mirror.gpg
Architectures: amd64
`
	if out.String() != want {
		t.Errorf("sources file:\n%s\nwant:\n%s", out.String(), want)
	}
	for _, host := range regexp.MustCompile(`[a-z]+://([^/\s]+)`).FindAllStringSubmatch(out.String(), -1) {
		if host[1] != "mirror.test.invalid" && host[1] != "mirror2.test.invalid" {
			t.Errorf("sources file names host %s, which the machine's sources do not enable for bookworm main", host[1])
		}
	}
}
