package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "tiles", 4, true)
	b.Set(2)
	b.Set(4)
	b.Finish()
	out := buf.String()
	if !strings.Contains(out, "4/4 100%") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, "tiles [") {
		t.Fatalf("bar output %q", out)
	}
	var quiet bytes.Buffer
	q := New(&quiet, "x", 10, false) // a buffer is not a terminal
	q.Set(5)
	q.Finish()
	if quiet.Len() != 0 {
		t.Fatalf("drew on a non-terminal: %q", quiet.String())
	}
}
