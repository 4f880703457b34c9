package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/natsconn"
	"github.com/gohtgs/htgs/pathology"
	"github.com/gohtgs/htgs/pats"
	"github.com/gohtgs/htgs/task"
)

// With -cluster N the real run's stage instances run on worker processes:
// the program runs a NATS server (cluster.StartServerProcess, from the
// nats-server executable of -nats-server) and N
// copies of itself with -worker, writes the slide into the cluster's
// region storage (cluster.Regions) and sends each tile, as a cluster.Remote
// task, to whichever worker is free. A worker runs the tile's whole flow
// (segmentation and features) on its own pats.Manager and simulated units,
// reading only the tile's ROI of the slide from the region storage and
// writing the labels, feature rows and nuclei polygons back into it; the
// run then reads each tile's outputs from the storage and prints what a
// single-process run prints, plus the work of each worker.

// The task the workers serve and its version: a Remote and the workers must
// agree on both.
const (
	tileTask    = "pathology-tile"
	tileVersion = "v1"
)

// Timing of the cluster's processes.
const (
	registerWait  = time.Minute            // for the worker processes to register
	stopWait      = 10 * time.Second       // for a worker process to stop after SIGTERM, before SIGKILL
	pullWait      = 250 * time.Millisecond // a worker's pull requests, hence how long it takes to stop
	reconnectWait = 250 * time.Millisecond // between a worker's reconnection attempts
	reconnects    = 20                     // attempts before a worker gives the server up (about 5 s)
	// tileAckWait is the tile task's AckWait: a tile a dead worker held
	// goes to another worker this long after its last progress report (a
	// live worker reports every third of it while a tile runs).
	tileAckWait = 5 * time.Second
)

// clusterFlags are the flags of a -cluster run's supervision of its
// workers.
type clusterFlags struct {
	restart bool          // -restart
	timeout time.Duration // -worker-timeout
	server  string        // -nats-server: as given, then its path
}

// addClusterFlags declares the supervision flags into o.
func addClusterFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.cl.restart, "restart", true, "with -cluster: start a worker process again when it dies (its tiles go to the others meanwhile)")
	fs.DurationVar(&o.cl.timeout, "worker-timeout", time.Minute, "with -cluster: fail when no worker has served for this `long`")
	fs.StringVar(&o.cl.server, "nats-server", "nats-server", "with -cluster: the nats-server `executable` to run (a name is looked up in $PATH); install it with go install "+cluster.NATSServerModule+"@"+cluster.NATSServerVersion)
}

// tileWork is the input of the remote stage: one tile of the slide, and
// what a worker needs to find it in the region storage.
type tileWork struct {
	Tile    int    // the tile's index
	Tiles   int    // the slide's tiles
	Size    int    // the tile edge in pixels
	Chunk   int    // the region storage's chunk edge (every process must use the same)
	Seed    uint64 // the slide's seed (the modelled costs depend on it)
	Dynamic bool   // features as a stage spawned only when nuclei were found
}

// tileDone is the output of the remote stage: what the worker found and
// where it ran the operations. The labels, feature rows and nuclei
// polygons are in the region storage.
type tileDone struct {
	Tile, Nuclei int
	Worker       string
	Spawned      bool           // the features flow was spawned (-dynamic)
	CPU, GPU     map[string]int // operation instances run on CPU cores and on GPUs, by operation
}

// clusterTile is a tile's result on the graph's side: as a single-process
// run's, read back from the region storage, with the worker's report.
type clusterTile struct {
	pathology.TileResult
	done tileDone
}

// regionChunk returns the chunk edge of the region storage for tiles of
// size pixels: a tile's ROI is whole chunks when it fits in one, so that
// reading a tile fetches no neighbour's pixels and writing it needs no
// compare-and-swap.
func regionChunk(size int) int { return min(size, 256) }

// checkCluster checks the flags of -cluster and -worker.
func (o *options) checkCluster() error {
	set := o.set
	switch {
	case o.worker && set["cluster"]:
		return cli.Usagef("-worker and -cluster do not go together: -cluster starts the workers itself")
	case o.worker && o.natsURL == "":
		return cli.Usagef("-worker needs -nats URL, the server to join (its token in $%s or the URL)", natsconn.EnvToken)
	case !o.worker && set["nats"]:
		return cli.Usagef("-nats goes with -worker")
	case !o.worker && set["name"]:
		return cli.Usagef("-name goes with -worker")
	case set["cluster"] && (o.clusterN < 1 || o.clusterN > 64):
		return cli.Usagef("-cluster %d: want 1 to 64 worker processes", o.clusterN)
	case set["cluster"] && (o.sim || o.experiment || o.hardware):
		return cli.Usagef("-cluster is a real run: it goes with none of -sim, -experiment and -hardware")
	case set["cluster"] && (set["storage"] || set["dir"]):
		return cli.Usagef("-cluster keeps the regions in the cluster's storage: -storage and -dir do not apply")
	case (set["restart"] || set["worker-timeout"]) && !set["cluster"]:
		return cli.Usagef("-restart and -worker-timeout supervise the workers of -cluster")
	case set["worker-timeout"] && o.cl.timeout <= 0:
		return cli.Usagef("-worker-timeout %v: must be positive", o.cl.timeout)
	case set["nats-server"] && !set["cluster"]:
		return cli.Usagef("-nats-server is the server -cluster runs: it applies to -cluster")
	}
	if o.clusterN > 0 {
		path, err := cluster.FindServerExecutable(o.cl.server)
		if err != nil {
			return cli.Usagef("-cluster %d runs a NATS server: -nats-server %s: %v", o.clusterN, o.cl.server, err)
		}
		o.cl.server = path
	}
	if o.worker {
		// A worker takes the settings of its node (units and scheduling);
		// the slide and the outputs are the -cluster run's.
		allowed := map[string]bool{"worker": true, "nats": true, "name": true, "policy": true, "window": true,
			"cpus": true, "gpus": true, "scale": true, "locality": true, "ti": true, "prefetch": true, "learn": true, "depthfirst": true}
		var extra []string
		for f := range set {
			if !allowed[f] {
				extra = append(extra, "-"+f)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return cli.Usagef("-worker takes its node's settings only (-policy, -window, -cpus, -gpus, -scale, -locality, -ti, -prefetch, -learn, -depthfirst, -name); %s belong to the -cluster run", strings.Join(extra, ", "))
		}
	}
	return nil
}

// workerArgs returns the command line of worker process name of a -cluster
// run: its node settings are the run's. The token is not in it.
func (o *options) workerArgs(natsURL, name string) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{"-worker", "-nats", natsURL, "-name", name,
		"-policy", o.policy, "-window", strconv.Itoa(o.window), "-cpus", strconv.Itoa(o.cpus), "-gpus", strconv.Itoa(o.gpus),
		"-scale", f(o.scale), "-ti", f(o.ti), "-locality=" + strconv.FormatBool(o.locality), "-prefetch=" + strconv.FormatBool(o.prefetch),
		"-learn=" + strconv.FormatBool(o.learn), "-depthfirst=" + strconv.FormatBool(o.depthFirst)}
}

// workerThreads returns how many tiles a worker runs at a time: its pats
// window, or 64 for an unbounded one.
func (o *options) workerThreads() int {
	if o.window > 0 {
		return o.window
	}
	return 64
}

// runCluster is the real run on o.clusterN worker processes.
func runCluster(parent context.Context, o *options, stdout, stderr io.Writer) (err error) {
	// The outputs were checked by prepareOutputs.
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cluster: the program to start workers from: %w", err)
	}
	srv, err := cluster.StartServerProcess(parent, o.cl.server)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer func() {
		if serr := srv.Shutdown(); serr != nil && err == nil {
			err = serr
		}
	}()
	// More workers on this machine may join the run: the token waits for
	// them in a file only this user can read, removed when the run ends.
	tokenFile, err := writeTokenFile(srv.Token())
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer os.Remove(tokenFile)
	nc, err := srv.Connect(nats.Name(prog + " run"))
	if err != nil {
		return fmt.Errorf("cluster: connect to the NATS server: %w", err)
	}
	defer nc.Close()

	client, err := cluster.NewClient(parent, nc)
	if err != nil {
		return fmt.Errorf("cluster: client: %w", err)
	}
	defer func() {
		if cerr := client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("cluster: close the client: %w", cerr)
		}
	}()
	// A worker process that dies is reported and restarted; the run fails
	// only when no worker has served for -worker-timeout.
	sup, ctx := cluster.Supervise(parent, client, tileTask, tileVersion, cluster.Restart(o.cl.restart),
		cluster.WorkerTimeout(o.cl.timeout), cluster.Reports(stderr), cluster.WorkerOutput(stderr), cluster.StopWait(stopWait))
	defer func() {
		if serr := sup.Close(); serr != nil && err == nil {
			err = serr
		}
	}()
	defer func() {
		if err != nil && parent.Err() == nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause // no worker served, not the cancellation it caused
			}
		}
	}()
	for k := range o.clusterN {
		name := fmt.Sprintf("%s-w%d", prog, k+1)
		// The token goes through the environment: the -nats URL on the
		// command line carries none, since other users of the machine can
		// read command lines.
		if _, err := sup.Start(cluster.LocalWorker{Name: name, Path: exe, Args: o.workerArgs(srv.URL(), name), Env: []string{natsconn.EnvToken + "=" + srv.Token()}}); err != nil {
			return err
		}
	}
	chunk := regionChunk(o.tileSize)
	store, err := cluster.NewRegions(ctx, nc, cluster.RegionChunk(chunk, chunk, 1))
	if err != nil {
		return fmt.Errorf("cluster: region storage: %w", err)
	}
	s, err := pathology.NewSlide(ctx, o.tiles, o.tileSize, o.seed, store, store)
	if err != nil {
		return fmt.Errorf("cluster: write the slide: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, registerWait)
	infos, err := sup.WaitServing(wctx, o.clusterN)
	wcancel()
	if err != nil {
		return fmt.Errorf("cluster: waiting for the worker processes to register: %w", err)
	}
	var joined []string
	for _, w := range infos {
		joined = append(joined, fmt.Sprintf("%s (pid %d)", w.Name, w.PID))
	}
	fmt.Fprintf(stdout, "cluster: NATS server at %s (%s, pid %d); %d worker processes: %s\n", srv.URL(), o.cl.server, srv.Pid(), len(infos), strings.Join(joined, ", "))
	fmt.Fprintf(stdout, "cluster: more workers on this machine join with: %s=$(cat %s) %s -worker -nats %s\n", natsconn.EnvToken, tokenFile, prog, srv.URL())

	// The client's reports (a tile delivered again after its worker was
	// lost) name the tile.
	label := cluster.InputLabel(func(w tileWork) string { return fmt.Sprintf("tile %d of %d", w.Tile, w.Tiles) })
	remote, err := cluster.NewRemote[tileWork, tileDone](client, tileTask, cluster.Version(tileVersion), label)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	opts, live, err := o.startOptions(stdout)
	if err != nil {
		return err
	}
	defer live.Close(ctx, o.httpWait, stdout)

	start := time.Now()
	results, exec, err := runClusterGraph(ctx, o, s, remote, stdout, opts...)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	o.writeClusterReport(stdout, results, wall, client.Stats())
	if st := sup.Stats(); st.Deaths > 0 {
		fmt.Fprintf(stdout, "cluster: %d worker process(es) died, %d restarted, %d given up\n", st.Deaths, st.Restarts, st.GivenUp)
	}
	plain := make([]pathology.TileResult, len(results))
	for i, r := range results {
		plain[i] = r.TileResult
	}
	if err := o.writeNuclei(ctx, s, plain, stdout); err != nil {
		return err
	}
	return o.writeProfile(exec, stdout, stderr)
}

// runClusterGraph sends every tile of s to the workers through remote and
// collects its outputs from the slide's storage (pathology.ReadTileResult),
// printing the progress of each worker at most once a second and at the
// end. It returns the results in tile order.
func runClusterGraph(ctx context.Context, o *options, s *pathology.Slide, remote *cluster.Remote[tileWork, tileDone], stdout io.Writer, opts ...graph.StartOption) ([]clusterTile, *graph.Execution, error) {
	inflight := o.tiles
	if o.window > 0 {
		inflight = min(o.tiles, o.clusterN*o.window)
	}
	g := graph.New[tileWork, clusterTile](prog + "-cluster")
	tiles := graph.AddTask(g, "tiles", inflight, remote.Task)
	collect := graph.AddFunc(g, "collect", 2, func(ctx context.Context, d tileDone, out task.Emitter[clusterTile]) error {
		r, err := pathology.ReadTileResult(ctx, s, d.Tile, d.Nuclei)
		if err != nil {
			return fmt.Errorf("collect: tile %d from worker %s: %w", d.Tile, d.Worker, err)
		}
		return out.Emit(clusterTile{TileResult: r, done: d})
	})
	graph.Connect(g.Input(), tiles)
	graph.Connect(tiles, collect)
	graph.Connect(collect, g.Output())
	chunk := regionChunk(s.TileSize())
	work := func(yield func(tileWork) bool) {
		for i := range s.Tiles() {
			if !yield(tileWork{Tile: i, Tiles: s.Tiles(), Size: s.TileSize(), Chunk: chunk, Seed: s.Seed(), Dynamic: o.dynamic}) {
				return
			}
		}
	}
	var exec *graph.Execution
	opts = append(slices.Clip(opts), graph.WithStarted(func(e *graph.Execution) { exec = e }))
	results := make([]clusterTile, s.Tiles())
	byWorker := map[string]int{}
	done, last := 0, time.Now()
	err := g.Run(ctx, work, func(r clusterTile) error {
		results[r.Tile()] = r
		byWorker[r.done.Worker]++
		if done++; done == s.Tiles() || time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "progress: %d/%d tiles (%s)\n", done, s.Tiles(), countsByName(byWorker))
		}
		return nil
	}, opts...)
	if err != nil {
		return nil, nil, err
	}
	return results, exec, nil
}

// countsByName formats counts by name, sorted by name.
func countsByName(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// writeClusterReport writes the summary of a -cluster run: the line a
// single-process run prints, the work of each worker, where the
// operations ran and what the client counted.
func (o *options) writeClusterReport(w io.Writer, results []clusterTile, wall time.Duration, st cluster.ClientStats) {
	type workerSum struct{ tiles, nuclei, cpu, gpu int }
	sums := map[string]*workerSum{}
	cpu, gpu := map[string]int{}, map[string]int{}
	nuclei, spawned := 0, 0
	for _, r := range results {
		nuclei += r.Nuclei()
		if r.done.Spawned {
			spawned++
		}
		ws := sums[r.done.Worker]
		if ws == nil {
			ws = &workerSum{}
			sums[r.done.Worker] = ws
		}
		ws.tiles++
		ws.nuclei += r.Nuclei()
		for op, n := range r.done.CPU {
			cpu[op] += n
			ws.cpu += n
		}
		for op, n := range r.done.GPU {
			gpu[op] += n
			ws.gpu += n
		}
	}
	fmt.Fprintf(w, "processed %d tiles (%dx%d px, cluster storage) on %d worker processes (%d simulated CPU cores + %d simulated GPUs each) in %v: %d nuclei\n",
		o.tiles, o.tileSize, o.tileSize, o.clusterN, o.cpus, o.gpus, wall.Round(time.Millisecond), nuclei)
	if o.dynamic {
		fmt.Fprintf(w, "features computed for %d of %d tiles (flows spawned at run time)\n", spawned, o.tiles)
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ws := sums[n]
		fmt.Fprintf(w, "worker %s: %d tiles, %d nuclei, %d operations on CPU cores, %d on GPUs\n", n, ws.tiles, ws.nuclei, ws.cpu, ws.gpu)
	}
	fmt.Fprintf(w, "cluster: %d tiles sent, %d results received (%d redelivered, %d duplicates dropped)\n", st.Sent, st.Results, st.Redelivered, st.Duplicates)
	fmt.Fprintf(w, "%-18s %6s %6s %6s\n", "operation", "cpu", "gpu", "gpu%")
	for _, op := range pathology.NewWorkload(o.tiles, o.seed).OpNames() {
		c, g := cpu[op], gpu[op]
		share := "n/a"
		if c+g > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(g)/float64(c+g))
		}
		fmt.Fprintf(w, "%-18s %6d %6d %6s\n", op, c, g, share)
	}
}

// runWorker is -worker: it joins the server o.natsURL names and runs tiles
// for -cluster runs until ctx is cancelled (SIGINT, SIGTERM) or the server
// is gone for good.
func runWorker(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	name := o.workerName
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "worker"
		}
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	shown := natsconn.Redact(o.natsURL)
	// A worker of -cluster stops when the run's supervisor goes.
	ctx, stopped := cluster.Supervised(ctx)
	defer stopped()
	ctx, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	nopts := []nats.Option{nats.Name(prog + " worker " + name), nats.MaxReconnects(reconnects), nats.ReconnectWait(reconnectWait),
		nats.ClosedHandler(func(*nats.Conn) {
			gone(fmt.Errorf("worker %s: the connection to %s is closed: the server went away", name, shown))
		})}
	nc, err := natsconn.Connect(o.natsURL, nopts...)
	if err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	defer nc.Close()

	svc, err := newTileService(ctx, o, name, nc)
	if err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	w := cluster.NewWorker(cluster.WorkerName(name), cluster.PullWait(pullWait),
		cluster.Logger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	threads := o.workerThreads()
	if err := cluster.Handle(w, tileTask, svc.newTask, cluster.Version(tileVersion), cluster.Copies(threads), cluster.AckWait(tileAckWait)); err != nil {
		_ = svc.m.Close()
		return fmt.Errorf("worker %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "worker %s: serving %s at %s, %d tiles at a time on %d simulated CPU cores + %d simulated GPUs (%s)\n",
		name, tileTask, shown, threads, o.cpus, o.gpus, svc.cfg)
	serveErr := w.Serve(ctx, nc)
	closeErr := svc.m.Close()
	fmt.Fprintf(stdout, "worker %s: stopped after %d tiles\n", name, w.Stats().Executed)
	switch {
	case serveErr != nil:
		return fmt.Errorf("worker %s: %w", name, serveErr)
	case closeErr != nil:
		return fmt.Errorf("worker %s: close the manager: %w", name, closeErr)
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause // the server went away
	}
	return nil
}

// tileService runs tiles on a worker: every copy of the task submits its
// tile's flow to one pats.Manager on the worker's simulated units
// (pathology.TileRunner), as the copies of a single-process run's stage
// task do.
type tileService struct {
	name   string
	nc     *nats.Conn
	cfg    pats.Config
	m      *pats.Manager
	runner *pathology.TileRunner

	mu      sync.Mutex
	regions map[int]*cluster.Regions // by chunk edge
}

// newTileService starts the worker's manager. It runs until Close, not
// until ctx is done: on SIGTERM the worker finishes the tiles it has.
func newTileService(ctx context.Context, o *options, name string, nc *nats.Conn) (*tileService, error) {
	cfg := o.config()
	est := pathology.NewWorkload(1, o.seed).GivenSpeedups()
	if o.learn {
		est = nil
	}
	m, err := pats.Start(context.WithoutCancel(ctx), cfg, o.machine().Units(o.scale)...)
	if err != nil {
		return nil, err
	}
	return &tileService{name: name, nc: nc, cfg: cfg, m: m, runner: pathology.NewTileRunner(m, est),
		regions: map[int]*cluster.Regions{}}, nil
}

// storage returns the region storage for chunk edge chunk, opening it on
// first use.
func (svc *tileService) storage(ctx context.Context, chunk int) (*cluster.Regions, error) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if r := svc.regions[chunk]; r != nil {
		return r, nil
	}
	r, err := cluster.NewRegions(ctx, svc.nc, cluster.RegionChunk(chunk, chunk, 1))
	if err != nil {
		return nil, fmt.Errorf("region storage: %w", err)
	}
	svc.regions[chunk] = r
	return r, nil
}

// newTask returns a copy of the worker's task; the copies share the
// service.
func (svc *tileService) newTask() task.Task[tileWork, tileDone] {
	return &tileCopy{svc: svc}
}

// tileCopy is one copy of the worker's task.
type tileCopy struct{ svc *tileService }

// Execute runs tile in.Tile: it builds the tile's region template on the
// cluster's region storage (its RGB ROI read lazily from it, its labels
// and feature rows committed to it when its flow completes), runs the flow
// on the worker's manager, outlines the nuclei into the slide's polygon
// set in the storage and reports what it found.
func (c *tileCopy) Execute(ctx context.Context, in tileWork, out task.Emitter[tileDone]) error {
	done, err := c.svc.run(ctx, in)
	if err != nil {
		return fmt.Errorf("worker %s: tile %d: %w", c.svc.name, in.Tile, err)
	}
	return out.Emit(done)
}

// run runs one tile; see tileCopy.Execute.
func (svc *tileService) run(ctx context.Context, in tileWork) (tileDone, error) {
	if in.Tiles < 1 || in.Tile < 0 || in.Tile >= in.Tiles || in.Size < 1 || in.Chunk < 1 {
		return tileDone{}, fmt.Errorf("malformed input %+v", in)
	}
	store, err := svc.storage(ctx, in.Chunk)
	if err != nil {
		return tileDone{}, err
	}
	s := pathology.OpenSlide(in.Tiles, in.Size, in.Seed, store, store)
	rep, err := svc.runner.Run(ctx, s, in.Tile, in.Dynamic)
	if err != nil {
		return tileDone{}, err
	}
	return tileDone{Tile: in.Tile, Nuclei: rep.Nuclei, Worker: svc.name, Spawned: rep.Spawned, CPU: rep.CPU, GPU: rep.GPU}, nil
}

// writeTokenFile writes a server's token into a new file readable by this
// user only and returns its name.
func writeTokenFile(token string) (string, error) {
	f, err := os.CreateTemp("", prog+"-nats-token-*")
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	name := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(token)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("token file: %w", err)
	}
	return name, nil
}
