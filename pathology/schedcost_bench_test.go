package pathology

import (
	"testing"
	"time"

	"github.com/gohtgs/htgs/pats"
)

// BenchmarkSimulateHardwarePATS simulates the hardware experiment's
// PATS (FinishAware, window 32) and PATS+DL+prefetch on 15 cores and a
// GPU, 96 tiles of 4096², with the operation costs of the H200 call of
// 2026-11-27 14:32Z (a core under load, the GPU's content fit's slide
// mean). The simulator runs the real-time manager's scheduling code, so
// the time per simulated operation is the scheduling work the manager does
// for one operation: on that machine, most cores idle and 32 tiles'
// operations ready, each idle core used to build the GPU's queue again
// at every step.
func BenchmarkSimulateHardwarePATS(b *testing.B) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	cal := &calibration{cpu: map[string]time.Duration{}, gpu: map[string]time.Duration{}}
	for op, c := range map[string][2]float64{
		"RBCDetection": {136.5, 0.31}, "MorphOpen": {149.8, 0.83}, "ReconToNuclei": {402.6, 3.26},
		"AreaThreshold": {176.4, 0.63}, "FillHoles": {72.3, 7.82}, "PreWatershed": {579.5, 3.24},
		"Watershed": {241.6, 4.24}, "BWLabel": {40.1, 0.49}, "FeatIntensity": {20.0, 0.22},
		"FeatGradient": {369.3, 0.70}, "FeatMorphometry": {30.6, 0.08},
	} {
		cal.cpu[op], cal.gpu[op] = ms(c[0]), ms(c[1])
	}
	h := &hwSetup{cpus: 15, accels: hostAccels(1), tiles: 96, size: 4096, window: 32, specs: hardwareOperations(), regionBuf: realBytes(4096)}
	m := pats.Machine{CPUs: 15, GPUs: 1, Bandwidth: 40e9, StageBandwidth: 4.2e9, CommitBandwidth: 3.3e9}
	for _, name := range []string{"pats", "dl"} {
		c := hwConfigs(h.window, 0.6, cal.speedups(), cal.speedupsWithTransfers(), true)[name]
		b.Run(name, func(b *testing.B) {
			ops := 0
			for b.Loop() {
				b.StopTimer()
				fs := h.simFlows(cal, c.est, cal.predicted)
				b.StartTimer()
				if _, err := pats.Simulate(c.cfg, m, fs); err != nil {
					b.Fatal(err)
				}
				ops += h.tiles * len(h.specs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops), "ns/operation")
		})
	}
}
