package region

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBox(t *testing.T) {
	a := Rect(0, 0, 10, 8)
	if got := a.Len(); got != 80 {
		t.Errorf("Len = %d, want 80", got)
	}
	if got := a.Shape(); got != [3]int{10, 8, 1} {
		t.Errorf("Shape = %v", got)
	}
	if !a.Contains(Rect(2, 2, 10, 8)) || a.Contains(Rect(2, 2, 11, 8)) || a.Contains(Cube(0, 0, 0, 1, 1, 1)) {
		t.Error("Contains is wrong")
	}
	if got, want := a.Intersect(Rect(5, 5, 20, 20)), Rect(5, 5, 10, 8); got != want {
		t.Errorf("Intersect = %v, want %v", got, want)
	}
	if got := a.Intersect(Rect(20, 20, 30, 30)); !got.Empty() {
		t.Errorf("disjoint Intersect = %v, want empty", got)
	}
	if got, want := a.Union(Rect(-1, 3, 4, 12)), Rect(-1, 0, 10, 12); got != want {
		t.Errorf("Union = %v, want %v", got, want)
	}
	if got := (Box{}).Union(a); got != a {
		t.Errorf("zero Union = %v", got)
	}
	if got := Cube(0, 0, 0, 2, 3, 4).String(); got != "[0,2)x[0,3)x[0,4)" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []Box{{}, {Dims: 4}, Rect(5, 0, 4, 1), {Dims: 2, Hi: [3]int{1, 1, 2}}} {
		if err := bad.Validate(); !errors.Is(err, ErrBadBox) {
			t.Errorf("Validate(%v) = %v, want ErrBadBox", bad, err)
		}
	}
	if !a.ContainsPoint(9, 7, 0) || a.ContainsPoint(10, 0, 0) || a.ContainsPoint(0, 0, 1) {
		t.Error("ContainsPoint is wrong")
	}
}

func TestIDValidate(t *testing.T) {
	good := []ID{
		{Name: "RGB", Type: Dense2D},
		{Name: "patient-7::RGB.v2", Type: Dense3D, Timestamp: 3, Version: 1},
		{Name: "a_b", Type: Polygons},
	}
	for _, id := range good {
		if err := id.Validate(); err != nil {
			t.Errorf("Validate(%v) = %v", id, err)
		}
	}
	bad := []struct {
		id   ID
		want string
	}{
		{ID{Type: Dense2D}, "empty name"},
		{ID{Name: "a::b::c", Type: Dense2D}, "more than one"},
		{ID{Name: "::b", Type: Dense2D}, "empty segment"},
		{ID{Name: "a b", Type: Dense2D}, "not allowed"},
		{ID{Name: "a/b", Type: Dense2D}, "not allowed"},
		{ID{Name: ".hidden", Type: Dense2D}, "starts with"},
		{ID{Name: "x", Type: 0}, "unknown kind"},
		{ID{Name: "x", Type: 99}, "unknown kind"},
		{ID{Name: "x", Type: Dense2D, Version: -1}, "negative"},
		{ID{Name: strings.Repeat("x", 200), Type: Dense2D}, "longer than"},
	}
	for _, c := range bad {
		err := c.id.Validate()
		if !errors.Is(err, ErrBadID) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want ErrBadID mentioning %q", c.id, err, c.want)
		}
	}
}

func TestIDStringRoundTrip(t *testing.T) {
	id := ID{Name: "slide::mask", Type: Dense2D, Timestamp: 4, Version: 2}
	s := id.String()
	if s != "slide::mask/dense2d/t4/v2" {
		t.Fatalf("String = %q", s)
	}
	got, err := ParseID(s)
	if err != nil || got != id {
		t.Fatalf("ParseID(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "a/dense2d/t1", "a/cube/t1/v1", "a/dense2d/x1/v1", "a/dense2d/t1/vX", "a b/dense2d/t0/v0", "a/dense2d/t-1/v0", "a/dense2d/t01/v0", "a/dense2d/t0/v+1", "a/dense2d/t-0/v0"} {
		if _, err := ParseID(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("ParseID(%q) = %v, want ErrBadID", bad, err)
		}
	}
}

type gray16 uint16
type score float32

func TestElemOf(t *testing.T) {
	cases := []struct{ got, want ElemType }{
		{ElemOf[uint8](), Uint8},
		{ElemOf[uint16](), Uint16},
		{ElemOf[int32](), Int32},
		{ElemOf[float32](), Float32},
		{ElemOf[float64](), Float64},
		{ElemOf[gray16](), Uint16},
		{ElemOf[score](), Float32},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: ElemOf = %v, want %v", i, c.got, c.want)
		}
	}
	if Float64.Size() != 8 || Uint16.String() != "uint16" || ElemType(42).Size() != 0 {
		t.Error("ElemType methods are wrong")
	}
}

// storages returns a fresh in-memory and a fresh on-disk storage.
func storages(t *testing.T) map[string]Storage {
	d, err := NewDisk(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Storage{"memory": NewMemory(), "disk": d}
}

// pattern returns box.Len() little-endian uint16 values whose value encodes
// the template coordinates of each point: 100*y + x (+ 10000*z).
func pattern(box Box) []byte {
	out := make([]byte, 0, 2*box.Len())
	for z := box.Lo[2]; z < box.Hi[2]; z++ {
		for y := box.Lo[1]; y < box.Hi[1]; y++ {
			for x := box.Lo[0]; x < box.Hi[0]; x++ {
				v := uint16(10000*z + 100*y + x)
				out = append(out, byte(v), byte(v>>8))
			}
		}
	}
	return out
}

func TestStorageRoundTrip(t *testing.T) {
	ctx := context.Background()
	for name, st := range storages(t) {
		t.Run(name, func(t *testing.T) {
			for _, bounds := range []Box{Rect(10, 20, 40, 35), Cube(0, 0, 0, 7, 5, 3)} {
				m := Meta{ID: ID{Name: "img", Type: denseKind(bounds.Dims), Version: bounds.Dims}, Elem: Uint16, Bounds: bounds}
				// Write the whole array in four pieces: rows, a column strip, the rest.
				s := bounds.Shape()
				mid := Box{Dims: bounds.Dims, Lo: bounds.Lo, Hi: bounds.Hi}
				mid.Hi[1] = bounds.Lo[1] + s[1]/2
				top := bounds
				top.Lo[1] = mid.Hi[1]
				left, right := top, top
				left.Hi[0] = bounds.Lo[0] + s[0]/3
				right.Lo[0] = left.Hi[0]
				for _, b := range []Box{mid, left, right} {
					if err := st.Write(ctx, m, b, pattern(b)); err != nil {
						t.Fatalf("Write %v: %v", b, err)
					}
				}
				// Every sub-box reads back the pattern.
				for _, b := range []Box{bounds, mid, right, bounds.Intersect(Box{Dims: bounds.Dims, Lo: [3]int{12, 1, 1}, Hi: [3]int{19, 33, 2}})} {
					if b.Empty() {
						continue
					}
					got := make([]byte, 2*b.Len())
					if err := st.Read(ctx, m.ID, b, got); err != nil {
						t.Fatalf("Read %v: %v", b, err)
					}
					if !slices.Equal(got, pattern(b)) {
						t.Errorf("Read %v returned other data", b)
					}
				}
				if got, err := st.Stat(ctx, m.ID); err != nil || got != m {
					t.Errorf("Stat = %+v, %v; want %+v", got, err, m)
				}
			}
			ids, err := st.List(ctx)
			if err != nil || len(ids) != 2 || ids[0].Version != 2 || ids[1].Version != 3 {
				t.Errorf("List = %v, %v", ids, err)
			}
		})
	}
}

func TestStorageErrors(t *testing.T) {
	ctx := context.Background()
	for name, st := range storages(t) {
		t.Run(name, func(t *testing.T) {
			m := Meta{ID: ID{Name: "mask", Type: Dense2D}, Elem: Uint8, Bounds: Rect(0, 0, 4, 4)}
			if err := st.Write(ctx, m, Rect(0, 0, 4, 4), make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
			missing := ID{Name: "mask", Type: Dense2D, Version: 9}
			if err := st.Read(ctx, missing, Rect(0, 0, 1, 1), make([]byte, 1)); !errors.Is(err, ErrNotFound) {
				t.Errorf("Read missing = %v, want ErrNotFound", err)
			}
			if _, err := st.Stat(ctx, missing); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat missing = %v, want ErrNotFound", err)
			}
			if err := st.Delete(ctx, missing); !errors.Is(err, ErrNotFound) {
				t.Errorf("Delete missing = %v, want ErrNotFound", err)
			}
			if err := st.Read(ctx, m.ID, Rect(2, 2, 5, 3), make([]byte, 3)); !errors.Is(err, ErrOutOfBounds) || !strings.Contains(err.Error(), "[2,5)x[2,3)") {
				t.Errorf("Read outside = %v, want ErrOutOfBounds naming the box", err)
			}
			if err := st.Write(ctx, m, Rect(-1, 0, 1, 1), make([]byte, 2)); !errors.Is(err, ErrOutOfBounds) {
				t.Errorf("Write outside = %v, want ErrOutOfBounds", err)
			}
			if err := st.Read(ctx, m.ID, Rect(0, 0, 2, 2), make([]byte, 3)); err == nil {
				t.Error("Read with a short buffer succeeded")
			}
			other := m
			other.Elem = Float32
			if err := st.Write(ctx, other, Rect(0, 0, 1, 1), make([]byte, 4)); !errors.Is(err, ErrExists) {
				t.Errorf("Write with other element type = %v, want ErrExists", err)
			}
			bad := m
			bad.ID.Name = "bad name"
			if err := st.Write(ctx, bad, Rect(0, 0, 1, 1), make([]byte, 1)); !errors.Is(err, ErrBadID) {
				t.Errorf("Write with bad ID = %v, want ErrBadID", err)
			}
			wrongKind := m
			wrongKind.ID.Type = Dense3D
			if err := st.Write(ctx, wrongKind, Rect(0, 0, 1, 1), make([]byte, 1)); !errors.Is(err, ErrType) {
				t.Errorf("Write 2-D bounds as dense3d = %v, want ErrType", err)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := st.Read(cctx, m.ID, Rect(0, 0, 1, 1), make([]byte, 1)); !errors.Is(err, context.Canceled) {
				t.Errorf("Read with cancelled context = %v", err)
			}
			if err := st.Delete(ctx, m.ID); err != nil {
				t.Fatal(err)
			}
			if ids, _ := st.List(ctx); len(ids) != 0 {
				t.Errorf("List after Delete = %v", ids)
			}
		})
	}
}

func TestDiskPersists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d1, err := NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewDense[float64](ID{Name: "slide::features"}, Rect(0, 0, 3, 2))
	vals, _ := r.Data(ctx)
	for i := range vals {
		vals[i] = math.Pi * float64(i)
	}
	vals[5] = math.Inf(-1)
	r.SetOutput(d1)
	if err := r.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A second storage on the same directory sees the region.
	d2, _ := NewDisk(dir)
	back, err := OpenDense[float64](ctx, d2, r.ID(), Box{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Data(ctx)
	if err != nil || !slices.Equal(got, vals) {
		t.Errorf("read back %v, %v; want %v", got, err, vals)
	}
	if _, err := OpenDense[uint8](ctx, d2, r.ID(), Box{}); !errors.Is(err, ErrType) {
		t.Errorf("OpenDense with the wrong element type = %v, want ErrType", err)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 2 {
		t.Errorf("disk storage holds %d files, want 2 (metadata and array)", len(files))
	}
}

// countingStorage records the boxes read from the storage it wraps.
type countingStorage struct {
	Storage
	mu    sync.Mutex
	reads []Box
}

func (c *countingStorage) Read(ctx context.Context, id ID, box Box, data []byte) error {
	c.mu.Lock()
	c.reads = append(c.reads, box)
	c.mu.Unlock()
	return c.Storage.Read(ctx, id, box, data)
}

func (c *countingStorage) boxes() []Box {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

// storedTile writes a 2-D uint16 tile with the coordinate pattern.
func storedTile(t *testing.T, bounds Box) (*countingStorage, ID) {
	t.Helper()
	st := &countingStorage{Storage: NewMemory()}
	id := ID{Name: "tile", Type: Dense2D}
	if err := st.Write(context.Background(), Meta{ID: id, Elem: Uint16, Bounds: bounds}, bounds, pattern(bounds)); err != nil {
		t.Fatal(err)
	}
	return st, id
}

func TestDenseLazyROIRead(t *testing.T) {
	ctx := context.Background()
	bounds := Rect(0, 0, 50, 40)
	st, id := storedTile(t, bounds)
	roi := Rect(10, 5, 20, 9)
	r, err := BindDense[uint16](id, bounds, roi, st)
	if err != nil {
		t.Fatal(err)
	}
	if r.Loaded() || len(st.boxes()) != 0 {
		t.Fatal("binding a region read data")
	}
	if r.Bytes() != int64(2*roi.Len()) {
		t.Errorf("Bytes = %d, want %d", r.Bytes(), 2*roi.Len())
	}
	data, err := r.Data(ctx) // first access reads the ROI, and only the ROI
	if err != nil {
		t.Fatal(err)
	}
	if got := st.boxes(); len(got) != 1 || got[0] != roi {
		t.Fatalf("storage reads = %v, want exactly the ROI %v", got, roi)
	}
	if len(data) != roi.Len() || r.At(10, 5) != 510 || r.At(19, 8) != 819 {
		t.Errorf("ROI data wrong: len %d, At(10,5)=%d At(19,8)=%d", len(data), r.At(10, 5), r.At(19, 8))
	}
	if _, err := r.Data(ctx); err != nil || len(st.boxes()) != 1 {
		t.Errorf("second access read again: %v", st.boxes())
	}
	// Shrinking a loaded ROI crops in memory without reading.
	if err := r.SetROI(Rect(12, 6, 14, 8)); err != nil {
		t.Fatal(err)
	}
	if len(st.boxes()) != 1 || r.At(13, 7) != 713 || r.Bytes() != 8 {
		t.Errorf("crop: reads %v, At(13,7)=%d, Bytes=%d", st.boxes(), r.At(13, 7), r.Bytes())
	}
	// Growing it drops the data and reads the new ROI on next access.
	if err := r.SetROI(Rect(0, 0, 3, 3)); err != nil {
		t.Fatal(err)
	}
	if r.Loaded() {
		t.Error("grown ROI still loaded")
	}
	if err := r.Stage(ctx); err != nil || r.At(2, 2) != 202 {
		t.Errorf("Stage after growing: %v, At(2,2)=%d", err, r.At(2, 2))
	}
	if got := st.boxes(); len(got) != 2 || got[1] != Rect(0, 0, 3, 3) {
		t.Errorf("reads = %v", got)
	}
}

func TestDenseBadROI(t *testing.T) {
	bounds := Rect(0, 0, 50, 40)
	st, id := storedTile(t, bounds)
	_, err := BindDense[uint16](id, bounds, Rect(40, 30, 60, 45), st)
	if !errors.Is(err, ErrOutOfBounds) || !strings.Contains(err.Error(), "[40,60)x[30,45)") || !strings.Contains(err.Error(), "tile") {
		t.Errorf("BindDense outside bounds = %v, want ErrOutOfBounds naming ROI and region", err)
	}
	if _, err := BindDense[uint16](id, bounds, Cube(0, 0, 0, 1, 1, 1), st); !errors.Is(err, ErrOutOfBounds) {
		t.Errorf("3-D ROI of 2-D region = %v, want ErrOutOfBounds", err)
	}
	if _, err := BindDense[uint16](id, bounds, bounds, nil); !errors.Is(err, ErrNoStorage) {
		t.Errorf("BindDense without storage = %v, want ErrNoStorage", err)
	}
	r, _ := BindDense[uint16](id, bounds, Rect(0, 0, 5, 5), st)
	if err := r.SetROI(Rect(-1, 0, 5, 5)); !errors.Is(err, ErrOutOfBounds) {
		t.Errorf("SetROI outside = %v", err)
	}
	// A ROI is validated against the stored bounds on read too.
	wrong, _ := BindDense[uint16](id, Rect(0, 0, 100, 100), Rect(60, 60, 70, 70), st)
	if _, err := wrong.Data(context.Background()); !errors.Is(err, ErrOutOfBounds) {
		t.Errorf("reading a ROI outside the stored array = %v, want ErrOutOfBounds", err)
	}
	mem, _ := NewDense[uint8](ID{Name: "m"}, Rect(0, 0, 4, 4))
	_ = mem.SetROI(Rect(0, 0, 2, 2))
	if err := mem.SetROI(Rect(0, 0, 4, 4)); !errors.Is(err, ErrNoStorage) {
		t.Errorf("growing the ROI of an in-memory region = %v, want ErrNoStorage", err)
	}
	if err := mem.Commit(context.Background()); !errors.Is(err, ErrNoStorage) {
		t.Errorf("Commit without output = %v, want ErrNoStorage", err)
	}
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "outside the ROI") {
				t.Errorf("At outside the ROI: panic %v", p)
			}
		}()
		mem.At(3, 3)
	}()
	lazy, _ := BindDense[uint16](id, bounds, bounds, st)
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "before its data was read") {
				t.Errorf("At before reading: panic %v", p)
			}
		}()
		lazy.At(0, 0)
	}()
	if _, err := NewDense[uint8](ID{Name: "x", Type: Dense3D}, Rect(0, 0, 1, 1)); !errors.Is(err, ErrType) {
		t.Errorf("NewDense with mismatched kind = %v, want ErrType", err)
	}
}

// Two stage instances each commit their partition (ROI) of one output
// region; the stored region holds both.
func TestDensePartitionsCommit(t *testing.T) {
	ctx := context.Background()
	out := NewMemory()
	bounds := Rect(0, 0, 8, 4)
	id := ID{Name: "mask", Type: Dense2D}
	for i, roi := range []Box{Rect(0, 0, 4, 4), Rect(4, 0, 8, 4)} {
		r, _ := NewDense[uint8](id, bounds)
		if err := r.SetROI(roi); err != nil {
			t.Fatal(err)
		}
		data, _ := r.Data(ctx)
		for j := range data {
			data[j] = uint8(i + 1)
		}
		r.SetOutput(out)
		if err := r.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	all, err := OpenDense[uint8](ctx, out, id, Box{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := all.Data(ctx)
	want := []uint8{1, 1, 1, 1, 2, 2, 2, 2}
	for y := range 4 {
		if !slices.Equal(data[8*y:8*y+8], want) {
			t.Errorf("row %d = %v, want %v", y, data[8*y:8*y+8], want)
		}
	}
}

func TestDenseConcurrentLazyRead(t *testing.T) {
	bounds := Rect(0, 0, 64, 64)
	st, id := storedTile(t, bounds)
	r, _ := BindDense[uint16](id, bounds, bounds, st)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := r.Data(context.Background()); err != nil || d[65] != 101 {
				t.Errorf("Data: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := len(st.boxes()); n != 1 {
		t.Errorf("%d concurrent first accesses read %d times, want once", 8, n)
	}
}

func TestTemplate(t *testing.T) {
	tpl, err := NewTemplate("patient")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTemplate("bad name"); !errors.Is(err, ErrBadID) {
		t.Errorf("NewTemplate(bad name) = %v", err)
	}
	rgb, _ := NewDense[uint8](ID{Name: "RGB"}, Cube(0, 0, 0, 100, 80, 3))
	m0, _ := NewDense[uint8](ID{Name: "Mask"}, Rect(0, 0, 100, 80))
	m1, _ := NewDense[uint8](ID{Name: "Mask", Version: 1}, Rect(50, 50, 150, 130))
	for _, r := range []Region{rgb, m0, m1} {
		if err := tpl.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := tpl.Insert(m1); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate Insert = %v, want ErrExists", err)
	}
	if got, want := tpl.Bounds(), Cube(0, 0, 0, 150, 130, 3); got != want {
		t.Errorf("Bounds = %v, want %v", got, want)
	}
	if tpl.Len() != 3 {
		t.Errorf("Len = %d", tpl.Len())
	}
	if r, err := tpl.Latest("Mask"); err != nil || r != Region(m1) {
		t.Errorf("Latest = %v, %v", r, err)
	}
	if _, err := tpl.Latest("Nuclei"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Latest missing = %v", err)
	}
	_, err = tpl.Region(ID{Name: "Mask", Type: Dense2D, Version: 7})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "Mask/dense2d/t0/v1") {
		t.Errorf("missing version = %v, want ErrNotFound listing existing versions", err)
	}
	if _, err := tpl.Region(ID{Name: "Mask/x", Type: Dense2D}); !errors.Is(err, ErrBadID) {
		t.Errorf("lookup with bad ID = %v, want ErrBadID", err)
	}
	if _, err := Get[float32](tpl, m0.ID()); !errors.Is(err, ErrType) {
		t.Errorf("Get with wrong type = %v, want ErrType", err)
	}
	if got, err := Get[uint8](tpl, m0.ID()); err != nil || got != m0 {
		t.Errorf("Get = %v, %v", got, err)
	}
	var names []string
	for _, r := range tpl.Regions() {
		names = append(names, r.ID().String())
	}
	if want := []string{"Mask/dense2d/t0/v0", "Mask/dense2d/t0/v1", "RGB/dense3d/t0/v0"}; !slices.Equal(names, want) {
		t.Errorf("Regions = %v, want %v", names, want)
	}
	if err := tpl.Remove(m0.ID()); err != nil || tpl.Len() != 2 {
		t.Errorf("Remove: %v, Len %d", err, tpl.Len())
	}
	if err := tpl.Remove(m0.ID()); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove = %v", err)
	}
}

func TestTemplateInstantiateEagerAndLazy(t *testing.T) {
	ctx := context.Background()
	bounds := Rect(0, 0, 20, 20)
	for _, lazy := range []bool{false, true} {
		st, id := storedTile(t, bounds)
		tpl, _ := NewTemplate("slide")
		tpl.SetLazy(lazy)
		r, _ := BindDense[uint16](id, bounds, Rect(0, 0, 10, 10), st)
		if err := tpl.Insert(r); err != nil {
			t.Fatal(err)
		}
		if err := tpl.Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
		if r.Loaded() == lazy {
			t.Errorf("lazy=%v: loaded after Instantiate = %v", lazy, r.Loaded())
		}
		if _, err := r.Data(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(st.boxes()); n != 1 {
			t.Errorf("lazy=%v: %d reads, want 1", lazy, n)
		}
	}
	// Instantiate reports every failing region.
	tpl, _ := NewTemplate("broken")
	empty := NewMemory()
	for _, n := range []string{"a", "b"} {
		r, _ := BindDense[uint8](ID{Name: n}, bounds, bounds, empty)
		_ = tpl.Insert(r)
	}
	err := tpl.Instantiate(ctx)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "a/dense2d") || !strings.Contains(err.Error(), "b/dense2d") {
		t.Errorf("Instantiate of missing regions = %v", err)
	}
}

// TestDenseCallerMemory checks NewDenseIn and BindDenseIn: the ROI's data
// lives in the caller's buffer (as given, or read from storage into it),
// a buffer of the wrong length is refused, and SetROI moves the data off
// the buffer.
func TestDenseCallerMemory(t *testing.T) {
	ctx := context.Background()
	bounds := Rect(0, 0, 50, 40)
	roi := Rect(10, 5, 20, 9)
	buf := make([]uint16, roi.Len())
	for i := range buf {
		buf[i] = 0xBEEF // not zeroed: the region starts with what buf holds
	}
	d, err := NewDenseIn[uint16](ID{Name: "mem"}, bounds, roi, buf)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Loaded() || d.At(10, 5) != 0xBEEF {
		t.Fatalf("loaded %v, At(10,5)=%#x, want buf's contents", d.Loaded(), d.At(10, 5))
	}
	d.Set(19, 8, 7)
	if buf[len(buf)-1] != 7 {
		t.Error("Set did not write into the caller's buffer")
	}
	for _, n := range []int{roi.Len() - 1, roi.Len() + 1, 0} {
		if _, err := NewDenseIn[uint16](ID{Name: "mem"}, bounds, roi, make([]uint16, n)); !errors.Is(err, ErrOutOfBounds) {
			t.Errorf("NewDenseIn with %d elements for %d: %v, want ErrOutOfBounds", n, roi.Len(), err)
		}
	}

	st, id := storedTile(t, bounds)
	in := make([]uint16, roi.Len())
	r, err := BindDenseIn[uint16](id, bounds, roi, st, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Loaded() || len(st.boxes()) != 0 {
		t.Fatal("binding a region read data")
	}
	if err := r.Stage(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := r.Data(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if &data[0] != &in[0] || in[0] != 510 || in[len(in)-1] != 819 {
		t.Errorf("staged data not in the caller's buffer: same %v, first %d, last %d", &data[0] == &in[0], in[0], in[len(in)-1])
	}
	if _, err := BindDenseIn[uint16](id, bounds, roi, st, make([]uint16, 3)); !errors.Is(err, ErrOutOfBounds) {
		t.Errorf("BindDenseIn with a short buffer: %v, want ErrOutOfBounds", err)
	}
	// A changed ROI no longer uses the buffer: cropping copies out of it,
	// growing reads into memory of the region's own.
	if err := r.SetROI(Rect(12, 6, 14, 8)); err != nil {
		t.Fatal(err)
	}
	r.Set(13, 7, 1)
	if slices.Contains(in, 1) {
		t.Error("the cropped region still writes into the caller's buffer")
	}
	if err := r.SetROI(roi); err != nil {
		t.Fatal(err)
	}
	clear(in)
	if got, err := r.Data(ctx); err != nil || &got[0] == &in[0] || got[0] != 510 {
		t.Errorf("grown again: %v, in the old buffer %v, first %d", err, err == nil && &got[0] == &in[0], got[0])
	}
}
