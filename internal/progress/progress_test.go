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

// A bar names what it counts.
func TestBarUnit(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "mosaic", 80, true).WithUnit("tiles")
	b.Set(80)
	b.Finish()
	if out := buf.String(); !strings.Contains(out, "80/80 tiles 100%") {
		t.Fatalf("bar output %q, want the unit after the count", out)
	}
}

// The final state is drawn once.
func TestBarFinishDrawsOnce(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "pairs", 3, true)
	b.Set(3)
	b.Finish()
	if n := strings.Count(buf.String(), "3/3"); n != 1 {
		t.Fatalf("final state drawn %d times: %q", n, buf.String())
	}
	var empty bytes.Buffer
	e := New(&empty, "none", 0, true)
	e.Finish()
	if !strings.Contains(empty.String(), "0/0") {
		t.Fatalf("a bar finished without a Set draws nothing: %q", empty.String())
	}
}
