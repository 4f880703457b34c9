package infile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A FIFO, a directory and a socket are refused at once with an error that
// says what they are; regular files and links to them are read.
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tile.tif")
	if err := os.WriteFile(file, []byte("pixels"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.tif")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, link} {
		b, err := ReadFile(p)
		if err != nil || string(b) != "pixels" {
			t.Fatalf("%s: %q, %v", p, b, err)
		}
	}
	fifo := filepath.Join(dir, "fifo.tif")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	for p, want := range map[string]string{
		fifo: "is a named pipe (FIFO)",
		dir:  "is a directory",
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v, want an error naming it that says %q", p, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still opening after 10 s", p)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := readIn(root, "fifo.tif"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO in a root: %v", err)
	}
	if err := os.Symlink("tile.tif", filepath.Join(dir, "rel.tif")); err != nil {
		t.Fatal(err)
	}
	if b, err := readIn(root, "rel.tif"); err != nil || string(b) != "pixels" {
		t.Errorf("relative link in a root: %q, %v", b, err)
	}
}

// Inside a root, neither ".." nor a link can reach a file outside it.
func TestOpenInStaysInside(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.tif")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(dir, "escape.tif")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"escape.tif", rel, secret} {
		if b, err := readIn(root, name); err == nil {
			t.Errorf("%s: read %q outside the root", name, b)
		}
	}
}

// readIn reads the regular file name inside root through OpenIn.
func readIn(root *os.Root, name string) ([]byte, error) {
	f, err := OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
