package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (ServeHTTP's
// server among them).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
