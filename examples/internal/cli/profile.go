package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/graph/observe"
	"github.com/gohtgs/htgs/internal/outfile"
)

// WriteProfile writes what -profile means in every program into dir, for
// the run called name:
//   - name-trace.json, the timeline (Chrome trace JSON), when the run was
//     started with graph.WithTrace;
//   - name-stats.json, the run's statistics;
//   - name.dot, the graph's picture;
//   - name.svg, rendered by Graphviz's dot when it is installed.
//
// The trace and statistics are written first, since they need no Graphviz.
// A missing or failing dot is not an error: it is returned as warning, and
// the other files are still written. Every file is written atomically.
func WriteProfile(dir, name string, r *graph.Execution) (warning, err error) {
	return writeProfile(dir, name, execution{r})
}

// execution is a run as WriteProfile sees it: with its trace written by
// package observe.
type execution struct{ *graph.Execution }

func (e execution) WriteTrace(w io.Writer) error { return observe.WriteTrace(w, e.Execution) }

// observed is what WriteProfile uses of a run (tests fake it).
type observed interface {
	Stats() graph.Stats
	WriteDOT(w io.Writer, opt graph.DOTOptions) error
	WriteTrace(w io.Writer) error
}

func writeProfile(dir, name string, r observed) (warning, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	path := func(suffix string) string { return filepath.Join(dir, name+suffix) }
	var trace bytes.Buffer
	switch terr := r.WriteTrace(&trace); {
	case terr == nil:
		if err := outfile.WriteFile(path("-trace.json"), func(w io.Writer) error { _, err := w.Write(trace.Bytes()); return err }); err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
	case errors.Is(terr, graph.ErrNoTrace):
	default:
		return nil, fmt.Errorf("profile: trace: %w", terr)
	}
	if err := outfile.WriteFile(path("-stats.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r.Stats())
	}); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	var dot bytes.Buffer
	if err := r.WriteDOT(&dot, graph.DOTOptions{Color: graph.ColorCompute}); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := outfile.WriteFile(path(".dot"), func(w io.Writer) error { _, err := w.Write(dot.Bytes()); return err }); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return renderSVG(path(".svg"), dot.Bytes()), nil
}

// renderSVG runs Graphviz's dot on src and writes the picture to path,
// returning why it could not as a warning.
func renderSVG(path string, src []byte) error {
	bin, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("no SVG picture: Graphviz's dot is not installed")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(src), &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("no SVG picture: dot -Tsvg: %v: %s", err, bytes.TrimSpace(errOut.Bytes()))
	}
	if err := outfile.WriteFile(path, func(w io.Writer) error { _, err := w.Write(out.Bytes()); return err }); err != nil {
		return fmt.Errorf("no SVG picture: %w", err)
	}
	return nil
}
