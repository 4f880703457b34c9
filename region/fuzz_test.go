package region

import (
	"errors"
	"testing"
)

// FuzzParseID checks that ParseID accepts exactly the strings ID.String
// writes: whatever it accepts is a valid identifier that formats back to the
// same string, and whatever it rejects is rejected with ErrBadID.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"slide::mask/dense2d/t4/v2", "a/dense3d/t0/v0", "x.y-z_1/polygons/t12/v345",
		"", "a/dense2d/t1", "a/cube/t1/v1", "a/dense2d/x1/v1", "a/dense2d/t1/vX",
		"a b/dense2d/t0/v0", "a/dense2d/t-1/v0", "a::b::c/dense2d/t0/v0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, ErrBadID) {
				t.Fatalf("ParseID(%q) = %v, want an error wrapping ErrBadID", s, err)
			}
			return
		}
		if verr := id.Validate(); verr != nil {
			t.Fatalf("ParseID(%q) = %+v, which does not validate: %v", s, id, verr)
		}
		if got := id.String(); got != s {
			t.Fatalf("ParseID(%q) = %+v, which formats as %q: two spellings of one identifier", s, id, got)
		}
		again, err := ParseID(id.String())
		if err != nil || again != id {
			t.Fatalf("ParseID(%q) = %+v, %v; want %+v", id.String(), again, err, id)
		}
	})
}
