package region

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// Errors returned (wrapped, with the offending identifier or box) by this
// package. Test for them with [errors.Is].
var (
	// ErrBadID reports a malformed region identifier.
	ErrBadID = errors.New("invalid region identifier")
	// ErrBadBox reports a malformed bounding box.
	ErrBadBox = errors.New("invalid bounding box")
	// ErrOutOfBounds reports a region of interest, or a box read from or
	// written to storage, that does not lie inside the region's bounds.
	ErrOutOfBounds = errors.New("box out of bounds")
	// ErrNotFound reports a region missing from a template or a storage.
	ErrNotFound = errors.New("region not found")
	// ErrExists reports an attempt to insert a second region with the same
	// identifier, or to store a region whose element type or bounds differ
	// from the stored one.
	ErrExists = errors.New("region already exists")
	// ErrType reports an element type or region kind other than the one
	// asked for.
	ErrType = errors.New("region type mismatch")
	// ErrNoStorage reports a lazy read or a commit of a region that is bound
	// to no storage.
	ErrNoStorage = errors.New("region has no storage")
)

// Kind is the layout of a data region: the "type" in its identifier.
type Kind int

// Region kinds. The dense kinds are implemented by [Dense], the sparse ones
// by [Sparse] and Polygons by [PolygonSet]. New kinds are appended, so that
// the numeric values of the existing ones never change.
const (
	Dense2D  Kind = iota + 1 // a dense 2-D array
	Dense3D                  // a dense 3-D array
	Sparse2D                 // a sparse 2-D array
	Sparse3D                 // a sparse 3-D array
	Polygons                 // a set of 2-D polygons
	Dense1D                  // a dense 1-D array
)

// kindNames returns the names of the kinds, indexed by Kind.
func kindNames() [Dense1D + 1]string {
	return [...]string{Dense2D: "dense2d", Dense3D: "dense3d", Sparse2D: "sparse2d", Sparse3D: "sparse3d", Polygons: "polygons", Dense1D: "dense1d"}
}

// String returns the kind's name as used in identifiers, such as "dense2d".
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames()) {
		return kindNames()[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames() {
		if k > 0 && n == s {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("region: unknown region kind %q: %w", s, ErrBadID)
}

// ID identifies a data region inside a region template: a name, which may be
// qualified by a namespace as "namespace::key", the region's kind, a
// timestamp and a version. Regions of the same name must differ in at least
// one of the other three fields. Timestamp and version let a stage publish a
// new version of a region (a corrected mask, say) next to the old one.
type ID struct {
	Name      string // "key" or "namespace::key"
	Type      Kind   // layout of the region
	Timestamp int    // time step, >= 0
	Version   int    // version, >= 0
}

// maxNameLen bounds identifier names so that they fit in a file name.
const maxNameLen = 128

// Validate reports whether id is well formed: the name is one or two
// segments joined by "::", each segment made of ASCII letters, digits, '_',
// '-' and '.' and not starting with '.'; the kind is known; timestamp and
// version are not negative. Errors wrap [ErrBadID].
func (id ID) Validate() error {
	if id.Name == "" {
		return fmt.Errorf("region: identifier %v has an empty name: %w", id, ErrBadID)
	}
	if len(id.Name) > maxNameLen {
		return fmt.Errorf("region: identifier name %.20q... longer than %d bytes: %w", id.Name, maxNameLen, ErrBadID)
	}
	segs := strings.Split(id.Name, "::")
	if len(segs) > 2 {
		return fmt.Errorf("region: identifier name %q has more than one \"::\": %w", id.Name, ErrBadID)
	}
	for _, s := range segs {
		if err := checkSegment(s); err != nil {
			return fmt.Errorf("region: identifier name %q: %w: %w", id.Name, err, ErrBadID)
		}
	}
	if id.Type <= 0 || int(id.Type) >= len(kindNames()) {
		return fmt.Errorf("region: identifier %q has unknown kind %d: %w", id.Name, int(id.Type), ErrBadID)
	}
	if id.Timestamp < 0 || id.Version < 0 {
		return fmt.Errorf("region: identifier %q has negative timestamp or version (%d, %d): %w", id.Name, id.Timestamp, id.Version, ErrBadID)
	}
	return nil
}

func checkSegment(s string) error {
	if s == "" {
		return errors.New("empty segment")
	}
	if s[0] == '.' {
		return errors.New("segment starts with '.'")
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return fmt.Errorf("character %q not allowed", r)
		}
	}
	return nil
}

// String formats id as "name/kind/tTIMESTAMP/vVERSION", for example
// "patient::RGB/dense2d/t0/v1". ParseID reads it back.
func (id ID) String() string {
	return id.Name + "/" + id.Type.String() + "/t" + strconv.Itoa(id.Timestamp) + "/v" + strconv.Itoa(id.Version)
}

// ParseID parses the format written by ID.String and validates the result.
// It accepts only that format: ParseID(s) succeeds exactly when s is
// id.String() of a valid id, so timestamps and versions such as "t01" or
// "v+1" are refused. Errors wrap [ErrBadID].
func ParseID(s string) (ID, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || !strings.HasPrefix(parts[2], "t") || !strings.HasPrefix(parts[3], "v") {
		return ID{}, fmt.Errorf("region: identifier %q is not name/kind/tN/vN: %w", s, ErrBadID)
	}
	k, err := ParseKind(parts[1])
	if err != nil {
		return ID{}, fmt.Errorf("region: identifier %q: %w", s, err)
	}
	ts, ok1 := parseCount(parts[2][1:])
	ver, ok2 := parseCount(parts[3][1:])
	if !ok1 || !ok2 {
		return ID{}, fmt.Errorf("region: identifier %q has a malformed timestamp or version: %w", s, ErrBadID)
	}
	id := ID{Name: parts[0], Type: k, Timestamp: ts, Version: ver}
	if err := id.Validate(); err != nil {
		return ID{}, err
	}
	return id, nil
}

// parseCount parses a timestamp or version as ID.String writes it: decimal
// digits, no sign, no leading zero (except "0" itself), no overflow. Other
// spellings ("+1", "-0", "007") are refused, so that an identifier has one
// string form and ParseID(s).String() == s.
func parseCount(s string) (int, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// fileBase returns a file-name-safe rendering of a valid id. Names never
// contain '+', so replacing "::" by "+" is reversible.
func (id ID) fileBase() string {
	return strings.ReplaceAll(id.Name, "::", "+") + "." + id.Type.String() + ".t" + strconv.Itoa(id.Timestamp) + ".v" + strconv.Itoa(id.Version)
}

// less orders identifiers by name, then timestamp, version and kind.
func (id ID) less(o ID) bool {
	if id.Name != o.Name {
		return id.Name < o.Name
	}
	if id.Timestamp != o.Timestamp {
		return id.Timestamp < o.Timestamp
	}
	if id.Version != o.Version {
		return id.Version < o.Version
	}
	return id.Type < o.Type
}

// ElemType is the type of the elements of a dense or sparse region.
type ElemType int

// Element types.
const (
	Uint8 ElemType = iota + 1
	Uint16
	Int32
	Float32
	Float64
)

// elemNames returns the names of the element types, indexed by ElemType.
func elemNames() [Float64 + 1]string {
	return [...]string{Uint8: "uint8", Uint16: "uint16", Int32: "int32", Float32: "float32", Float64: "float64"}
}

// elemSizes returns the sizes of the element types, indexed by ElemType.
func elemSizes() [Float64 + 1]int {
	return [...]int{Uint8: 1, Uint16: 2, Int32: 4, Float32: 4, Float64: 8}
}

// String returns the Go name of the element type, such as "uint16".
func (e ElemType) String() string {
	if e > 0 && int(e) < len(elemNames()) {
		return elemNames()[e]
	}
	return "elem(" + strconv.Itoa(int(e)) + ")"
}

// Size returns the size of one element in bytes (0 for an unknown type).
func (e ElemType) Size() int {
	if e > 0 && int(e) < len(elemSizes()) {
		return elemSizes()[e]
	}
	return 0
}

// Elem is the set of Go types a dense region can hold.
type Elem interface {
	~uint8 | ~uint16 | ~int32 | ~float32 | ~float64
}

// ElemOf returns the ElemType of T.
func ElemOf[T Elem]() ElemType {
	var z T
	switch any(z).(type) {
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case int32:
		return Int32
	case float32:
		return Float32
	case float64:
		return Float64
	}
	// A named type with one of the underlying types above: tell them apart
	// by size and by whether a fraction survives conversion.
	half := 0.5
	switch size := unsafe.Sizeof(z); {
	case size == 1:
		return Uint8
	case size == 2:
		return Uint16
	case T(half) == 0:
		return Int32
	case size == 4:
		return Float32
	default:
		return Float64
	}
}
