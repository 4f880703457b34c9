package synth

import (
	"context"
	"testing"
)

// TestSolvable checks that the levels keep their documented difficulty for a
// minimal MIST-style aligner (pciam_test.go): Easy is solved by phase
// correlation alone; Realistic needs the stage model and refinement for a
// few pairs but then reaches at least 99% exact pairs.
func TestSolvable(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow; skipped with -short and -race")
	}
	count := func(ps []pairResult) (raw, refined int) {
		for _, p := range ps {
			if p.raw {
				raw++
			}
			if p.refined {
				refined++
			}
		}
		return raw, refined
	}
	ctx := context.Background()
	g, err := Generate(ctx, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pairs := solve(g)
	raw, refined := count(pairs)
	n := len(pairs)
	t.Logf("realistic: phase correlation exact %d/%d, after stage model and hill climbing %d/%d", raw, n, refined, n)
	if float64(raw) < 0.85*float64(n) {
		t.Errorf("realistic: only %d/%d pairs exact from phase correlation, want >= 85%%", raw, n)
	}
	if float64(refined) < 0.99*float64(n) {
		t.Errorf("realistic: only %d/%d pairs exact after refinement, want >= 99%%", refined, n)
	}
	if raw == n {
		t.Errorf("realistic: phase correlation alone solved every pair; the level has become too easy")
	}

	cfg := ConfigFor(Easy)
	cfg.Rows, cfg.Cols = 4, 5
	g, err = Generate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pairs = solve(g)
	raw, _ = count(pairs)
	t.Logf("easy: phase correlation exact %d/%d", raw, len(pairs))
	if raw != len(pairs) {
		t.Errorf("easy: phase correlation exact for only %d/%d pairs", raw, len(pairs))
	}
}
