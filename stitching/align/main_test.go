package align

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (the flat-field
// estimation's workers among them).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
