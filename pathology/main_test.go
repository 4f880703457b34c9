package pathology

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the runs stop
// their managers, task graphs and tile generators.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
