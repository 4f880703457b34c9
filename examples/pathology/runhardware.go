package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/pathology"
)

// runHardware runs the experiment on this machine (-hardware,
// pathology.Hardware) and writes its tables to stdout, and to hardware.md
// in -out if given.
func runHardware(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	var gpus *pathology.GPUs
	command := "pathology -hardware"
	if o.hostGPUs > 0 {
		gpus = pathology.HostGPUs(o.hostGPUs)
		command += fmt.Sprintf(" -host-gpus %d", o.hostGPUs)
	} else {
		limit := 0
		if o.set["gpus"] {
			limit = o.gpus
		}
		if gpus, err = pathology.CUDAGPUs(limit); err != nil {
			return fmt.Errorf("-hardware: %w (build with -tags cuda and run on a machine with a GPU, or pose host memory as GPUs with -host-gpus N)", err)
		}
	}
	defer func() {
		if cerr := gpus.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if o.out != "" {
		if err := outfile.CheckDir(o.out); err != nil {
			return err
		}
	}
	h := pathology.Hardware{CPUs: o.cpus, GPUs: gpus, Tiles: o.tiles, TileSize: o.tileSize, Window: o.window,
		Seed: o.seed, Log: stderr, SkipOrderOnly: !o.orderOnly, TraceDir: o.out, GoMemory: o.goMemory, StageOnFirstUse: o.firstUse, SyncUploads: o.syncUp, StorageOnCores: o.storeCores, SerialCommits: o.serialOut}
	if o.hwConfigs != "" {
		h.Configs = strings.Split(o.hwConfigs, ",") // checked by parseFlags
	}
	if !o.set["cpus"] {
		h.CPUs = max(1, runtime.NumCPU()-gpus.Len()) // a core per GPU manager thread, as in seed 001
	}
	if !o.set["tile-size"] {
		h.TileSize = 4096
	}
	if !o.set["tiles"] {
		h.Tiles = 96 // makespans of seconds to tens of seconds: start-up and the last tiles do not dominate
	}
	if !o.set["window"] {
		h.Window = 2 * (h.CPUs + gpus.Len())
	}
	// "-name value"; booleans "-name=value", which the flag package reads back.
	vals := map[string]string{"cpus": fmt.Sprint(h.CPUs), "tiles": fmt.Sprint(h.Tiles), "tile-size": fmt.Sprint(h.TileSize),
		"window": fmt.Sprint(h.Window), "seed": fmt.Sprint(h.Seed)}
	bools := map[string]bool{"order-only": o.orderOnly, "go-memory": o.goMemory, "stage-on-first-use": o.firstUse, "sync-uploads": o.syncUp, "storage-on-cores": o.storeCores, "serial-commits": o.serialOut}
	for _, f := range []string{"cpus", "tiles", "tile-size", "window", "seed", "order-only", "go-memory", "stage-on-first-use", "sync-uploads", "storage-on-cores", "serial-commits"} {
		if b, isBool := bools[f]; o.set[f] && isBool {
			command += fmt.Sprintf(" -%s=%v", f, b)
		} else if o.set[f] {
			command += fmt.Sprintf(" -%s %s", f, vals[f])
		}
	}
	res, err := h.Run(ctx)
	if err != nil {
		return fmt.Errorf("-hardware: %w", err)
	}
	var b strings.Builder
	if err := res.WriteMarkdown(&b, command); err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	if o.out != "" {
		if err := writeString(filepath.Join(o.out, "hardware.md"), b.String()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwritten to %s\n", filepath.Join(o.out, "hardware.md"))
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("-hardware: %w", err)
	}
	return nil
}
