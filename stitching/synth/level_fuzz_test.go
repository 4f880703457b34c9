package synth

import (
	"strings"
	"testing"

	"github.com/gohtgs/htgs/internal/fuzzrun"
)

// FuzzParseLevel: ParseLevel never panics, accepts exactly the level names
// in any case and with surrounding space (the level's String is the
// trimmed input), refuses the rest with an error naming the input, and
// round-trips through String.
func FuzzParseLevel(f *testing.F) {
	fuzzrun.Prepare(f)
	for _, s := range []string{"easy", "realistic", "hard", " Hard\t", "EASY", "", "medium", "Level(7)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLevel(s)
		if err != nil {
			if l != 0 || !strings.Contains(err.Error(), "unknown level") {
				t.Fatalf("refused %q as %v: %v", s, l, err)
			}
			return
		}
		if !strings.EqualFold(l.String(), strings.TrimSpace(s)) {
			t.Fatalf("%q parsed as %v", s, l)
		}
		if again, err := ParseLevel(l.String()); err != nil || again != l {
			t.Fatalf("%v does not parse back: %v, %v", l, again, err)
		}
	})
}
