//go:build cuda

package stitching

import (
	"context"
	"fmt"
	"image"

	"github.com/gohtgs/htgs/cuda"
	"github.com/gohtgs/htgs/cuda/cudapool"
	"github.com/gohtgs/htgs/memmgr"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/task"
)

// The refinement's slots hold a tile's pixels only, as image.Gray16 stores
// them.
func (b *cudaBackend) pixels(w, h int) memmgr.Allocator[devSpectrum] {
	return specAlloc{cudapool.DeviceBuffers(pixBytes(w, h))}
}

// pixelsOf returns the pixels of a slot: a refinement slot (pixels only)
// or a registration slot (spectrum, then pixels).
func pixelsOf(v devSpectrum, w, h int) (cuda.DeviceMem, error) {
	m, err := gpuMem(v)
	if err != nil {
		return m, err
	}
	if m.Size() == pixBytes(w, h) {
		return m, nil
	}
	_, pix, err := slotParts(v, w, h)
	return pix, err
}

// cudaUploader copies tiles into their slots through a pinned staging
// buffer on its own stream.
type cudaUploader struct {
	worker
	be      *cudaBackend
	staging cuda.HostMem
}

func (b *cudaBackend) newUploader(w, h int) uploader {
	return &cudaUploader{worker: worker{w: w, h: h, noPlan: true}, be: b}
}

func (u *cudaUploader) Initialize(ctx context.Context, info task.Info) error {
	if err := u.start(ctx, info); err != nil {
		return err
	}
	var err error
	if u.staging, err = u.dev.AllocHost(pixBytes(u.w, u.h)); err != nil {
		return err
	}
	u.frees = append(u.frees, u.staging.Free)
	return nil
}

func (u *cudaUploader) Shutdown(context.Context) error { return u.stop() }

func (u *cudaUploader) upload(_ context.Context, tile *image.Gray16, dst devSpectrum) error {
	pix, err := pixelsOf(dst, u.w, u.h)
	if err != nil {
		return err
	}
	w, h := u.w, u.h
	b := tile.Bounds()
	if b.Dx() != w || b.Dy() != h {
		return fmt.Errorf("stitching: uploading a %dx%d tile into a slot of %dx%d", b.Dx(), b.Dy(), w, h)
	}
	stg := u.staging.Bytes()
	if tile.Stride == 2*w && b.Min == (image.Point{}) {
		copy(stg[:2*w*h], tile.Pix[:2*w*h])
	} else {
		for y := range h {
			copy(stg[2*w*y:2*w*(y+1)], tile.Pix[tile.PixOffset(b.Min.X, b.Min.Y+y):])
		}
	}
	if err := cuda.CopyHtoD(u.stream, pix, u.staging); err != nil {
		return err
	}
	u.be.bus.Add(pixBytes(w, h))
	// The staging buffer is refilled by the next call, and the refine
	// task reads the slot on another stream: wait for the copy.
	return u.stream.Synchronize()
}

// boxBlock is the block size of the stitch_box_sums kernel (BOX_BLOCK),
// boxWarps its warps (BOX_WARPS).
const (
	boxBlock = 256
	boxWarps = boxBlock / 32
)

// cudaBoxScorer computes the exact NCC sums of every displacement of a box
// with the stitch_box_sums kernel (kernels/refine.cu), from the pixels in
// the tiles' slots; only the sums (5 uint64 per displacement) come back,
// and the correlations are computed from them on the host with
// align.Pearson, as align.NCC does.
type cudaBoxScorer struct {
	worker
	be    *cudaBackend
	mod   *cuda.Module
	fn    *cuda.Function
	cells int            // capacity of sums and stage, in displacements
	sums  cuda.DeviceMem // 5 uint64 per displacement
	stage cuda.HostMem
}

func (b *cudaBackend) newBoxScorer(w, h int) boxScorer {
	return &cudaBoxScorer{worker: worker{w: w, h: h, noPlan: true}, be: b}
}

func (s *cudaBoxScorer) Initialize(ctx context.Context, info task.Info) error {
	if err := s.start(ctx, info); err != nil {
		return err
	}
	if err := checkTileSize(s.w, s.h); err != nil {
		return err
	}
	var err error
	if s.mod, err = s.dev.LoadModule(refineImage); err != nil {
		return fmt.Errorf("stitching: loading the refinement kernels: %w", err)
	}
	s.frees = append(s.frees, s.mod.Close)
	if s.fn, err = s.mod.Function("stitch_box_sums"); err != nil {
		return err
	}
	return s.grow(1024)
}

// grow makes room for the sums of n displacements.
func (s *cudaBoxScorer) grow(n int) error {
	if n <= s.cells {
		return nil
	}
	n = max(n, 2*s.cells)
	bytes := 8 * sumsLen * int64(n)
	sums, err := s.dev.Alloc(bytes)
	if err != nil {
		return err
	}
	stage, err := s.dev.AllocHost(bytes)
	if err != nil {
		return fmt.Errorf("%w (and %w)", err, sums.Free())
	}
	if s.cells > 0 {
		if err := s.sums.Free(); err != nil {
			return err
		}
		if err := s.stage.Free(); err != nil {
			return err
		}
	} else {
		s.frees = append(s.frees, func() error { return s.sums.Free() }, func() error { return s.stage.Free() })
	}
	s.sums, s.stage, s.cells = sums, stage, n
	return nil
}

func (s *cudaBoxScorer) Shutdown(context.Context) error { return s.stop() }

// boxParts returns the number of blocks of stitch_box_sums that share a
// group of boxWarps neighbouring displacements (cells of a box), each block
// taking every per-th row of their overlaps: about 2048 blocks in all
// (some 15 per SM of an H100), at most one a row of the tallest overlap.
func boxParts(cells, rows int) int {
	groups := (cells + boxWarps - 1) / boxWarps
	return max(1, min((2048+groups-1)/groups, rows))
}

func (s *cudaBoxScorer) boxNCC(_ context.Context, t1, t2 devSpectrum, x0, x1, y0, y1 int, dst []float64) error {
	p1, err := pixelsOf(t1, s.w, s.h)
	if err != nil {
		return err
	}
	p2, err := pixelsOf(t2, s.w, s.h)
	if err != nil {
		return err
	}
	bw, bh := x1-x0+1, y1-y0+1
	cells := bw * bh
	if bw < 1 || bh < 1 || len(dst) < cells {
		return fmt.Errorf("stitching: box [%d, %d] x [%d, %d] with %d values", x0, x1, y0, y1, len(dst))
	}
	if err := s.grow(cells); err != nil {
		return err
	}
	bytes := 8 * sumsLen * int64(cells)
	sums, stage := s.sums.Slice(0, bytes), s.stage.Slice(0, bytes)
	if err := cuda.Memset(s.stream, sums, 0); err != nil {
		return err
	}
	// The tallest overlap of the box: that of the row nearest 0.
	cy := min(max(0, y0), y1)
	per := boxParts(cells, s.h-abs(cy))
	grid := uint32((cells + boxWarps - 1) / boxWarps * per)
	if err := s.fn.Launch(s.stream, grid, boxBlock, p1, p2, s.w, s.h, x0, y0, bw, cells, per, sums); err != nil {
		return err
	}
	if err := cuda.CopyDtoH(s.stream, stage, sums); err != nil {
		return err
	}
	s.be.bus.Add(bytes)
	if err := s.stream.Synchronize(); err != nil {
		return err
	}
	hs := cuda.HostSlice[uint64](stage)
	for i := range cells {
		x, y := x0+i%bw, y0+i/bw
		nx, ny := s.w-abs(x), s.h-abs(y)
		var n uint64
		if nx > 0 && ny > 0 {
			n = uint64(nx) * uint64(ny)
		}
		v := hs[sumsLen*i:]
		dst[i] = align.Pearson(n, v[0], v[1], v[2], v[3], v[4])
	}
	return nil
}
