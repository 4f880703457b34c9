// Package pathology is a whole-slide-image analysis pipeline in the spirit
// of Teodoro et al.'s brain-tumour pipeline, scheduled by package pats on
// CPU cores and GPUs: each tile of a slide goes through segmentation
// (red-blood-cell detection, morphological opening, reconstruction to
// nuclei, area threshold, hole filling, pre-watershed, watershed,
// labelling) and feature computation (intensity and hematoxylin by colour
// deconvolution, gradient and Canny edges, morphometry), eleven
// operations (Operations) with very different GPU speedups.
//
// The operations are real image kernels on the tile's region template
// (package region): reconstructions by geodesic dilation, an opening by a
// 19x19 disk, an exact Euclidean distance, a marker watershed, union-find
// labelling and per-object features, at the speed of OpenCV on one core.
// All of them also have CUDA kernels (kernels/pathology.cu, embedded in
// builds with -tags cuda) whose outputs equal the CPU's bit for bit, and
// Go mirrors of those kernels for machines without a GPU (HostGPUs).
//
// Run processes a slide (NewSlide) through a task graph whose stage task
// expands each tile into its operations on a pats.Manager, then outlines
// each tile's nuclei as polygons in the output storage and joins them
// with their feature rows (WriteNucleiGeoJSON, Slide.NucleiInBox). With
// simulated units (pats.Machine.Units) each operation instance takes the
// time the modelled Workload gives a 4K x 4K tile; the Workload's flows
// also run in the simulator (pats.Simulate). TileRunner and
// ReadTileResult run single tiles for the workers of a distributed run;
// Hardware runs the whole experiment on this machine's cores and GPUs,
// measuring each operation first and comparing each run with the
// simulator's prediction.
//
// A real run on simulated units:
//
//	s, err := pathology.NewSlide(ctx, 48, 128, 1, region.NewMemory(), region.NewMemory())
//	if err != nil { ... }
//	w := pathology.NewWorkload(48, 1)
//	res, err := pathology.Run(ctx, s, w, pathology.RunOptions{
//		Config:   pats.Config{Policy: pats.PATS, Window: 16},
//		Units:    pathology.ReferenceMachine().Units(0.05), // a modelled second takes 50 ms
//		Speedups: w.GivenSpeedups(),
//	})
//	if err != nil { ... }
//	for _, t := range res.Tiles {
//		fmt.Println(t.Tile(), t.Nuclei())
//	}
//
// The program examples/pathology drives it from the command line and runs
// the experiments of docs/pats.
package pathology
