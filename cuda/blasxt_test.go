package cuda

import (
	"errors"
	"testing"

	"gonum.org/v1/gonum/blas"
)

func TestBLASXtNeedsDevices(t *testing.T) {
	if _, err := NewBLASXt(nil); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("NewBLASXt(nil) = %v, want ErrNoDevice", err)
	}
}

func TestBLASXtClosed(t *testing.T) {
	var x BLASXt // never created: closed
	if err := x.Close(); err != nil {
		t.Fatalf("Close of a closed handle: %v", err)
	}
	a := make([]float64, 4)
	if err := x.Dgemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, 1, a, 2, a, 2, 0, a, 2); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dgemm on a closed handle = %v, want ErrClosed", err)
	}
	if err := x.SetBlockDim(1024); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetBlockDim on a closed handle = %v, want ErrClosed", err)
	}
}
