package pathology

import (
	"bufio"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gohtgs/htgs/pats"
)

// hwReplayDir is the output folder of a saved `pathology -hardware` run
// (hardware.log and hw/trace.csv, as scripts/device/pats.sh leaves them):
// TestReplaySavedHardwareRun recomputes the run's simulated makespans from
// them with the simulator of this build.
var hwReplayDir = flag.String("hwreplay", "", "folder of a saved hardware run (hardware.log, hw/trace.csv) to replay in the simulator")

// hwReplaySeed is the seed of the saved run's slide (pathology's -seed).
var hwReplaySeed = flag.Uint64("hwreplay-seed", 1, "seed of the saved hardware run's slide")

// hwReplayBW, when positive, replaces the logged host-GPU bandwidth (GB/s):
// what the simulator predicts had the calibration measured that rate.
var hwReplayBW = flag.Float64("hwreplay-bw", 0, "host-GPU GB/s to simulate instead of the logged calibration's (0: the log's)")

// hwReplayStage, when positive, replaces the logged staging rate (GB/s).
var hwReplayStage = flag.Float64("hwreplay-stage", 0, "staging GB/s to simulate instead of the logged calibration's (0: the log's)")

// hwReplayCommit, when positive, replaces the logged commit rate (GB/s).
var hwReplayCommit = flag.Float64("hwreplay-commit", 0, "commit GB/s to simulate instead of the logged calibration's (0: the log's)")

// hwReplayStreams, when positive, replaces the number of commits the
// saved run's storage wrote at once (1 before the eleventh session, every
// tile's since; pats.Machine.CommitStreams).
var hwReplayStreams = flag.Int("hwreplay-streams", 0, "commits the storage writes at once to simulate instead of the logged run's (0: the log's)")

// hwReplayGPU gives operations a hypothetical GPU compute time,
// "Op=DURATION,...": what the simulator predicts had they one (or that
// one), for the ones a saved run had on the CPU only.
var hwReplayGPU = flag.String("hwreplay-gpu", "", "hypothetical GPU compute times of CPU-only operations, Op=DURATION,... (TestSimulateVariantsOnSavedRun)")

// hwReplayCPU scales the CPU costs of operations whose CPU implementation
// has changed since a saved run (FeatGradient with its Canny edges), in
// TestSimulateVariantsOnSavedRun.
var hwReplayCPU = flag.String("hwreplay-cpu", "", "factors of the CPU costs of operations, Op=FACTOR,... (TestSimulateVariantsOnSavedRun)")

// savedRun is what a saved hardware run's log and trace hold: the
// calibration's figures (rounded as printed), the machine, and per
// configuration its measured and simulated makespans and its instances'
// times.
type savedRun struct {
	cpus, gpus, tiles, size, window int
	cal                             *calibration
	contentLo, contentHi, contentMn float64
	commitProxy                     bool // the log has no commit rate: the staging rate stands in
	serialOut                       bool // the run's storage wrote one tile's outputs at a time (every log before the eleventh session)
	storeCores                      bool // the run's CPU workers staged and committed (-storage-on-cores)
	ahead                           bool // the run staged its tiles from admission (logs of the sixth session on)
	runs                            []savedConfig
}

type savedConfig struct {
	name                   string
	real, simLog, replayLg float64 // seconds: measured, simulated and replayed as logged
	rec                    *instTimes
}

// savedRunOfFlags returns the saved run of -hwreplay (skipping the test
// without it), its slide's content computed again from -hwreplay-seed
// and checked against the log's mean, with -hwreplay-bw, -hwreplay-stage
// and -hwreplay-commit in place of the logged rates.
func savedRunOfFlags(t *testing.T) *savedRun {
	t.Helper()
	if *hwReplayDir == "" {
		t.Skip("no -hwreplay DIR")
	}
	s, err := parseSavedRun(*hwReplayDir)
	if err != nil {
		t.Fatal(err)
	}
	s.cal.content = contentOf(s.tiles, s.size, *hwReplaySeed)
	if s.contentMn > 0 && math.Abs(mean(s.cal.content)-s.contentMn) > 0.0001 {
		t.Fatalf("slide content mean %.4f%%, the log says %.2f%%: another seed?", 100*mean(s.cal.content), 100*s.contentMn)
	}
	if *hwReplayBW > 0 {
		s.cal.bandwidth = *hwReplayBW * 1e9
	}
	if *hwReplayStage > 0 {
		s.cal.stageBW = *hwReplayStage * 1e9
		if s.commitProxy {
			s.cal.commitBW = s.cal.stageBW
		}
	}
	if *hwReplayCommit > 0 {
		s.cal.commitBW = *hwReplayCommit * 1e9
	}
	return s
}

// setup returns the hardware setup of the saved run, with specs as its
// operations, and the simulator's machine for it (-hwreplay-streams in
// place of the logged commit streams).
func (s *savedRun) setup(specs []Operation) (*hwSetup, pats.Machine) {
	h := &hwSetup{cpus: s.cpus, accels: hostAccels(s.gpus), tiles: s.tiles, size: s.size, window: s.window, specs: specs, regionBuf: realBytes(s.size), serialOut: s.serialOut, storeCores: s.storeCores}
	m := h.machine(s.cal)
	if *hwReplayStreams > 0 {
		m.CommitStreams = *hwReplayStreams
	}
	return h, m
}

// spanFit returns the cost fit a log prints as its values at the lightest
// and the heaviest tile, loMs..hiMs milliseconds: the line through them
// over the slide's content range.
func (s *savedRun) spanFit(loMs, hiMs float64) costFit {
	lo, hi := loMs*1e6, hiMs*1e6
	f := costFit{a: lo, lo: s.contentLo, hi: s.contentHi, n: s.cpus}
	if s.contentHi > s.contentLo {
		f.b = (hi - lo) / (s.contentHi - s.contentLo)
		f.a = lo - f.b*s.contentLo
	}
	return f
}

// parseSavedRun reads dir/hardware.log and dir/hw/trace.csv.
func parseSavedRun(dir string) (*savedRun, error) {
	logText, err := os.ReadFile(filepath.Join(dir, "hardware.log"))
	if err != nil {
		return nil, err
	}
	s := &savedRun{cal: &calibration{cpu: map[string]time.Duration{}, gpu: map[string]time.Duration{}, cpuAlone: map[string]time.Duration{}, fit: map[string]costFit{}}}
	text := string(logText)
	num := func(v string) float64 {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			panic(fmt.Sprintf("replay: %q: %v", v, err))
		}
		return f
	}
	ms := func(v string) time.Duration { return time.Duration(num(v) * float64(time.Millisecond)) }
	m := regexp.MustCompile(`: (\d+) tiles of (\d+)x\d+ px \(RGB\), (\d+) CPU cores \+ (\d+) .*, window (\d+)[.;]`).FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("replay: no machine line in hardware.log")
	}
	s.tiles, s.size, s.cpus, s.gpus, s.window = int(num(m[1])), int(num(m[2])), int(num(m[3])), int(num(m[4])), int(num(m[5]))
	s.ahead = strings.Contains(text, "RGB staged from storage from its admission")
	m = regexp.MustCompile(`host-GPU bandwidth ([0-9.]+) GB/s, transfer impact ([0-9.]+), staging from storage ([0-9.]+) GB/s`).FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("replay: no rates in hardware.log")
	}
	s.cal.bandwidthAlone, s.cal.ti, s.cal.stageBWAlone = num(m[1])*1e9, num(m[2]), num(m[3])*1e9
	s.cal.bandwidth, s.cal.stageBW = s.cal.bandwidthAlone, s.cal.stageBWAlone
	if m = regexp.MustCompile(`Under that load, host-GPU bandwidth ([0-9.]+) GB/s and staging ([0-9.]+) GB/s per core`).FindStringSubmatch(text); m != nil {
		s.cal.bandwidth, s.cal.stageBW = num(m[1])*1e9, num(m[2])*1e9
	}
	// The commit rates; a log from before they were measured has none:
	// the staging rate stands in for them, as the same mechanism (a
	// tile's data copied through region.Memory into memory the copy
	// touches first) under the same load.
	s.cal.commitBW, s.cal.commitBWAlone = s.cal.stageBW, s.cal.stageBWAlone
	if m = regexp.MustCompile(`outputs are committed to storage at ([0-9.]+) GB/s alone(?:, ([0-9.]+) GB/s under load)?`).FindStringSubmatch(text); m != nil {
		s.cal.commitBWAlone, s.cal.commitBW = num(m[1])*1e9, num(m[1])*1e9
		if m[2] != "" {
			s.cal.commitBW = num(m[2]) * 1e9
		}
	} else {
		s.commitProxy = true
	}
	s.serialOut = !strings.Contains(text, "the storage writes the tiles' outputs in parallel")
	s.storeCores = strings.Contains(text, "-storage-on-cores=true")
	if m = regexp.MustCompile(`dark-pixel share \(([0-9.]+)% to ([0-9.]+)% over the \d+ tiles, mean ([0-9.]+)%\)`).FindStringSubmatch(text); m != nil {
		s.contentLo, s.contentHi, s.contentMn = num(m[1])/100, num(m[2])/100, num(m[3])/100
	}
	row := regexp.MustCompile(`(?m)^\| (\w+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+)\.\.([0-9.]+) \| ([0-9.]+) \| ([^|]+) \| ([^|]+) \|$`)
	for _, r := range row.FindAllStringSubmatch(text, -1) {
		op := r[1]
		s.cal.cpuAlone[op], s.cal.cpu[op] = ms(r[2]), ms(r[3])
		s.cal.fit[op] = s.spanFit(num(r[4]), num(r[5]))
		if g := strings.TrimSpace(r[7]); !strings.HasSuffix(g, "CPU only") { // "CPU only", or "T, output differs: CPU only"
			// The speedup has more digits than the GPU time: the GPU
			// time is the loaded CPU time over it.
			s.cal.gpu[op] = time.Duration(float64(s.cal.cpu[op]) / num(r[8]))
		}
	}
	if len(s.cal.cpu) == 0 {
		return nil, fmt.Errorf("replay: no operation table in hardware.log")
	}
	s.cal.xfer = map[string]time.Duration{}
	if m := regexp.MustCompile(`(?m)^Transfers of each GPU operation in the sequential pass .*: (.*)\.$`).FindStringSubmatch(text); m != nil {
		for _, r := range regexp.MustCompile(`(\w+) ([0-9.]+) ms`).FindAllStringSubmatch(m[1], -1) {
			s.cal.xfer[r[1]] = ms(r[2])
		}
	}
	s.cal.loaded = s.cpus
	if m := regexp.MustCompile(`(?m)^GPU compute time by content, .*: (.*)\.$`).FindStringSubmatch(text); m != nil {
		s.cal.gfit = map[string]costFit{}
		for _, r := range regexp.MustCompile(`(\w+) ([0-9.]+)\.\.([0-9.]+) ms`).FindAllStringSubmatch(m[1], -1) {
			s.cal.gfit[r[1]] = s.spanFit(num(r[2]), num(r[3]))
		}
	}
	line := regexp.MustCompile(`(?m)^(.+?): [0-9.]+ tiles/s, makespan ([0-9.]+) s \(simulated ([0-9.]+) s, [-+0-9.]+%; from the run's op times ([0-9.]+) s`)
	for _, r := range line.FindAllStringSubmatch(text, -1) {
		s.runs = append(s.runs, savedConfig{name: r[1], real: num(r[2]), simLog: num(r[3]), replayLg: num(r[4]), rec: newInstTimes()})
	}
	f, err := os.Open(filepath.Join(dir, "hw", "trace.csv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := csv.NewReader(bufio.NewReader(f))
	if _, err := cr.Read(); err != nil {
		return nil, err
	}
	byName := map[string]*instTimes{}
	for i := range s.runs {
		byName[strings.ReplaceAll(s.runs[i].name, ",", ";")] = s.runs[i].rec // as trace.csv names it
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		r := byName[rec[0]]
		if r == nil {
			continue
		}
		tile, _ := strconv.Atoi(rec[3])
		start, end := ms(rec[5]), ms(rec[6])
		r.events = append(r.events, traceEvent{unit: rec[1], what: rec[2], tile: tile, op: rec[4], start: start, end: end})
		if rec[2] != "compute" {
			continue
		}
		k := instKey{tile, rec[4]}
		if strings.HasPrefix(rec[1], "cpu") {
			r.cpu[k] = end - start
		} else {
			r.gpu[k] = end - start
		}
	}
	return s, nil
}

// contentOf returns the dark-pixel share of every tile of the saved run's
// slide, generating the tiles again (deterministic in the seed).
func contentOf(tiles, size int, seed uint64) []float64 {
	out := make([]float64, tiles)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(tiles, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]uint8, 3*size*size)
			for i := range next {
				genTile(buf, size, size, seed, i)
				out[i] = darkShare(buf, size*size)
			}
		}()
	}
	for i := range tiles {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// TestReplaySavedHardwareRun recomputes the simulated makespans of a saved
// hardware run (-hwreplay DIR) from its log's calibration figures and its
// trace's instance times, with this build's simulator, and reports their
// errors against the measured makespans beside the logged ones. It checks
// that the log's figures are read: the build that made the run must
// reproduce its own simulated makespans (within the rounding of the
// printed figures).
func TestReplaySavedHardwareRun(t *testing.T) {
	s := savedRunOfFlags(t)
	h, machine := s.setup(hardwareOperations())
	t.Logf("machine: %+v", machine)
	if s.commitProxy {
		t.Logf("the log has no commit rate: commits modelled at the staging rate, %.2f GB/s", machine.CommitBandwidth/1e9)
	}
	all := hwConfigs(s.window, s.cal.ti, s.cal.speedups(), s.cal.speedupsWithTransfers(), s.ahead)
	names := map[string]hwConfig{}
	for _, c := range all {
		names[c.name] = c
	}
	var worstSim, worstObs float64
	for _, r := range s.runs {
		base, _, _ := strings.Cut(r.name, " #")
		c, ok := names[base]
		if !ok {
			t.Fatalf("configuration %q unknown", r.name)
		}
		c.cfg = h.storage(c.cfg)
		sim, err := pats.Simulate(c.cfg, machine, h.simFlows(s.cal, c.est, s.cal.predicted))
		if err != nil {
			t.Fatal(err)
		}
		obs, err := pats.Simulate(c.cfg, machine, h.simFlows(s.cal, c.est, r.rec.costs(s.cal)))
		if err != nil {
			t.Fatal(err)
		}
		es, eo := sim.Makespan.Seconds()/r.real-1, obs.Makespan.Seconds()/r.real-1
		worstSim, worstObs = max(worstSim, math.Abs(es)), max(worstObs, math.Abs(eo))
		t.Logf("%-18s real %.2f s | logged: sim %.2f (%+.1f%%) replay %.2f (%+.1f%%) | this build: sim %.2f (%+.1f%%) replay %.2f (%+.1f%%)",
			r.name, r.real, r.simLog, 100*(r.simLog/r.real-1), r.replayLg, 100*(r.replayLg/r.real-1),
			sim.Makespan.Seconds(), 100*es, obs.Makespan.Seconds(), 100*eo)
	}
	t.Logf("largest error: simulated %.1f%%, replay of the run's op times %.1f%%", 100*worstSim, 100*worstObs)
}

// TestSimulateVariantsOnSavedRun simulates scheduling variants on a saved
// hardware run's calibration (-hwreplay DIR): the makespans the simulator
// predicts for FCFS, PATS and variants of PATS (windows, the effective
// speedup with data movement, locality and prefetch), from the
// calibration's predicted costs, and again from each saved run's own op
// times, each as a ratio to FCFS simulated the same way. Nothing is
// fitted to the measured makespans. -hwreplay-bw and -hwreplay-stage
// replace the calibration's host-GPU and staging rates.
func TestSimulateVariantsOnSavedRun(t *testing.T) {
	s := savedRunOfFlags(t)
	specs := hardwareOperations()
	if *hwReplayCPU != "" {
		for _, kv := range strings.Split(*hwReplayCPU, ",") {
			op, v, _ := strings.Cut(kv, "=")
			k, err := strconv.ParseFloat(v, 64)
			if err != nil || k <= 0 || !slices.ContainsFunc(specs, func(o Operation) bool { return o.Name == op }) {
				t.Fatalf("-hwreplay-cpu %q: want Op=FACTOR of a known operation", kv)
			}
			scale := func(d time.Duration) time.Duration { return time.Duration(k * float64(d)) }
			s.cal.cpu[op], s.cal.cpuAlone[op] = scale(s.cal.cpu[op]), scale(s.cal.cpuAlone[op])
			if f, ok := s.cal.fit[op]; ok {
				f.a, f.b = k*f.a, k*f.b
				s.cal.fit[op] = f
			}
			t.Logf("hypothetical: %s's CPU costs times %g (%v under load)", op, k, s.cal.cpu[op])
		}
	}
	if *hwReplayGPU != "" {
		for _, kv := range strings.Split(*hwReplayGPU, ",") {
			op, v, _ := strings.Cut(kv, "=")
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || !slices.ContainsFunc(specs, func(o Operation) bool { return o.Name == op }) {
				t.Fatalf("-hwreplay-gpu %q: want Op=DURATION of a known operation", kv)
			}
			s.cal.gpu[op] = d
			t.Logf("hypothetical: %s on the GPU in %v (speedup %.0f)", op, d, float64(s.cal.cpu[op])/float64(d))
		}
	}
	sp := s.cal.speedups()
	type variant struct {
		name string
		cfg  pats.Config
		est  map[string]float64 // the speedup estimates; nil: the compute speedups sp
	}
	w := s.window
	pw := func(win int, xfer, fin bool) pats.Config {
		return pats.Config{Policy: pats.PATS, Window: win, FinishAware: fin, TransferAware: xfer}
	}
	df := func(c pats.Config) pats.Config {
		c.DepthFirst = true
		return c
	}
	dl := func(xfer bool) pats.Config {
		return pats.Config{Policy: pats.PATS, Window: w, FinishAware: true, Locality: true, TransferImpact: s.cal.ti, Prefetch: true, TransferAware: xfer}
	}
	vs := []variant{
		{"FCFS", pats.Config{Policy: pats.FCFS, Window: w}, nil},
		{"PATS (order only)", pw(w, false, false), nil},
		{"PATS", pw(w, false, true), nil},
		{"PATS w=16", pw(16, false, true), nil},
		{"PATS w=64", pw(64, false, true), nil},
		{"PATS w=96", pw(96, false, true), nil},
		{"PATS+xfer (order only)", pw(w, true, false), nil},
		{"PATS+xfer", pw(w, true, true), nil},
		{"PATS+xfer w=16", pw(16, true, true), nil},
		{"PATS+xfer w=64", pw(64, true, true), nil},
		{"PATS+xfer w=96", pw(96, true, true), nil},
		{"PATS+df", df(pw(w, false, true)), nil},
		{"PATS+xfer+df", df(pw(w, true, true)), nil},
		{"PATS+xfer+df w=64", df(pw(64, true, true)), nil},
		{"PATS+prefetch", pats.Config{Policy: pats.PATS, Window: w, FinishAware: true, Prefetch: true}, nil},
		{"PATS+xfer+prefetch", pats.Config{Policy: pats.PATS, Window: w, FinishAware: true, Prefetch: true, TransferAware: true}, nil},
		{"PATS+DL+prefetch", dl(false), nil},
		{"PATS+xfer+DL+prefetch", dl(true), nil},
	}
	h, machine := s.setup(specs)
	// PATS given speedups that include each operation's transfers (the
	// "computation+data transfer" bars of seed 001's Fig. 5, patst's
	// estimates): C / (G + X), X as the log gives it, or where it does
	// not (older logs, hypothetical GPU operations, another rate given by
	// -hwreplay-bw) its inputs uploaded and its output downloaded at the
	// machine's rate.
	spx := map[string]float64{}
	for _, o := range specs {
		g, ok := s.cal.gpu[o.Name]
		if !ok {
			continue
		}
		x, ok := s.cal.xfer[o.Name]
		if !ok || *hwReplayBW > 0 {
			b := h.regionBuf[o.Writes]
			for _, k := range o.Reads {
				b += h.regionBuf[k]
			}
			x = time.Duration(float64(b) / machine.Bandwidth * float64(time.Second))
		}
		spx[o.Name] = float64(s.cal.cpu[o.Name]) / float64(g+x)
	}
	vs = append(vs, variant{"PATS, speedups with transfers", pw(w, false, true), spx},
		variant{"PATS+DL+prefetch, speedups with transfers", dl(false), spx})
	// FCFS and PATS with the tiles staged from admission (StageAhead),
	// without prefetch's pipelining.
	ahead := func(c pats.Config) pats.Config {
		c.StageAhead = true
		return c
	}
	vs = append(vs, variant{"FCFS, staged ahead", ahead(pats.Config{Policy: pats.FCFS, Window: w}), nil},
		variant{"PATS, staged ahead", ahead(pw(w, false, true)), nil},
		variant{"PATS+xfer, staged ahead", ahead(pw(w, true, true)), nil},
		variant{"PATS, speedups with transfers, staged ahead", ahead(pw(w, false, true)), spx})
	costs := []struct {
		name string
		fn   func(tile int, op string) pats.Cost
	}{{"predicted", s.cal.predicted}}
	for _, r := range s.runs {
		costs = append(costs, struct {
			name string
			fn   func(tile int, op string) pats.Cost
		}{"op times of " + r.name, r.rec.costs(s.cal)})
	}
	// The prefetch variants again with their background staging charged
	// to the cores (pats.Machine.StageOnCores): the Manager's staging
	// goroutines copy the tiles beside the workers, which the simulator
	// otherwise counts as free.
	for _, v := range vs {
		if v.cfg.Prefetch || v.cfg.StageAhead {
			vs = append(vs, variant{v.name + ", staging on cores", v.cfg, v.est})
		}
	}
	for _, c := range costs {
		var fcfs float64
		for _, v := range vs {
			m := machine
			m.StageOnCores = strings.HasSuffix(v.name, ", staging on cores")
			est := sp
			if v.est != nil {
				est = v.est
			}
			rep, err := pats.Simulate(v.cfg, m, h.simFlows(s.cal, est, c.fn))
			if err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			ms := rep.Makespan.Seconds()
			if fcfs == 0 {
				fcfs = ms
			}
			var gpuOps []string
			for _, o := range rep.Ops {
				if o.GPU > 0 {
					gpuOps = append(gpuOps, fmt.Sprintf("%s %d", o.Name, o.GPU))
				}
			}
			t.Logf("%-24s | %-22s | %.2f s | %.2fx | GPU: %s", c.name, v.name, ms, fcfs/ms, strings.Join(gpuOps, ", "))
		}
	}
}

// TestParseSavedRunOfThisVersion parses what a hardware run of this
// version writes (its log and tables as the program prints them, and its
// trace), staged from admission and on first use: the machine line, the
// runs and the staging mode.
func TestParseSavedRunOfThisVersion(t *testing.T) {
	ctx := context.Background()
	for _, firstUse := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "hw"), 0o755); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		h := Hardware{CPUs: 2, GPUs: HostGPUs(1), Tiles: 4, TileSize: 32, Window: 4, Seed: 5, Configs: []string{"fcfs", "pats"},
			Log: &out, TraceDir: filepath.Join(dir, "hw"), StageOnFirstUse: firstUse}
		res, err := h.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.WriteMarkdown(&out, "test"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hardware.log"), []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := parseSavedRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.tiles != 4 || s.size != 32 || s.cpus != 2 || s.gpus != 1 || s.window != 4 || len(s.runs) != 2 || s.ahead == firstUse {
			t.Errorf("first use %v: parsed %d tiles of %d px, %d cores, %d GPUs, window %d, %d runs, staged ahead %v",
				firstUse, s.tiles, s.size, s.cpus, s.gpus, s.window, len(s.runs), s.ahead)
		}
		// The GPU content fits come back to within the log's 0.01 ms.
		want := res.res.cal.gfit
		if len(want) == 0 || len(s.cal.gfit) != len(want) {
			t.Errorf("first use %v: %d GPU content fits parsed, the run had %d", firstUse, len(s.cal.gfit), len(want))
		}
		for op, f := range want {
			g, ok := s.cal.gfit[op]
			for _, x := range []float64{f.lo, f.hi} {
				if d := (g.at(x) - f.at(x)).Seconds() * 1e3; !ok || math.Abs(d) > 0.006 {
					t.Errorf("first use %v: %s's GPU fit at content %.4f: parsed %v, the run's %v", firstUse, op, x, g.at(x), f.at(x))
				}
			}
		}
	}
}
