package main

// Distributed registration: -nats (a client that sends bands of rows to
// workers), -worker (a worker that registers them) and -cluster (a
// nats-server child process and local worker processes in one command).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/cluster"
	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/graph"
	"github.com/gohtgs/htgs/internal/natsconn"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/tileio"
	"github.com/gohtgs/htgs/task"
)

const (
	// bandTask and bandVersion name the workers' task; a worker refuses a
	// band whose version differs.
	bandTask    = "stitch-band"
	bandVersion = "v1"
	// bandAckWait is the band task's AckWait: a band a dead worker held
	// goes to another worker this long after its last progress report
	// (a live worker reports every third of it while a band runs).
	bandAckWait = 5 * time.Second
	// viaFolder and viaStore are the values of -tiles-via.
	viaFolder = "folder"
	viaStore  = "store"
	// envChild is set in the environment of the local workers -cluster
	// starts (by its cluster.Supervisor): they stop when their standard
	// input, a pipe from the parent, closes.
	envChild = cluster.EnvSupervised
	// bandStall is how long the client's graph of bands may see no band
	// finish before it reports a stall.
	bandStall = 5 * time.Minute
)

// clusterConfig holds the flags of the distributed registration.
type clusterConfig struct {
	nats       string        // -nats
	worker     bool          // -worker
	cluster    int           // -cluster
	bandRows   int           // -band-rows
	workerName string        // -name
	allow      string        // -allow
	via        string        // -tiles-via
	restart    bool          // -restart
	timeout    time.Duration // -worker-timeout
	workersSet bool          // -workers was given
	natsServer string        // -nats-server: as given, then its path
}

// distributed reports whether the registration runs on workers.
func (cl *clusterConfig) distributed() bool { return cl.nats != "" || cl.cluster > 0 }

func addClusterFlags(fs *flag.FlagSet, c *config) {
	cl := &c.cl
	fs.StringVar(&cl.nats, "nats", "", "NATS server `URL`: register by bands of rows on the workers that serve it (stitch -worker), which read the tiles at the same path; the token comes from $"+natsconn.EnvToken+" or nats://TOKEN@HOST:PORT. With -worker: the server to join (default $"+cluster.EnvURL+")")
	fs.BoolVar(&cl.worker, "worker", false, "serve as a worker registering bands of rows for -nats clients until interrupted, one band at a time, each with -workers copies of each compute task (default: this machine's cores), on the GPUs with -gpu")
	fs.IntVar(&cl.cluster, "cluster", 0, "start a NATS server (the -nats-server executable) and `N` local worker processes, and register by bands of rows on them; -workers given is each worker's copies of each compute task, otherwise they share this machine's cores (cores/N each)")
	fs.IntVar(&cl.bandRows, "band-rows", 0, "with -nats or -cluster: grid rows per band (0: about 3 bands per worker, at least 4 rows when the grid has them)")
	fs.StringVar(&cl.allow, "allow", "", "with -worker: read tiles only from folders under `DIR` (default: any folder a client names)")
	fs.StringVar(&cl.workerName, "name", "", "with -worker: the worker's name in the clients' progress lines (default HOST-PID)")
	fs.StringVar(&cl.via, "tiles-via", viaFolder, "with -nats or -cluster: how workers get the tiles: "+viaFolder+" (they read the client's tile folder at the same path) or "+viaStore+" (the client puts them in the JetStream object store; no shared folder needed)")
	fs.BoolVar(&cl.restart, "restart", true, "with -cluster: start a local worker again when it dies (its bands go to the others meanwhile)")
	fs.DurationVar(&cl.timeout, "worker-timeout", time.Minute, "with -nats or -cluster: fail when no worker has served for this `long`")
	fs.StringVar(&cl.natsServer, "nats-server", "nats-server", "with -cluster: the nats-server `executable` to run (a name is looked up in $PATH); install it with go install "+cluster.NATSServerModule+"@"+cluster.NATSServerVersion)
}

// checkCluster checks the distributed registration's flags.
func checkCluster(c *config, set map[string]bool) error {
	cl := &c.cl
	switch {
	case cl.cluster < 0:
		return cli.Usagef("-cluster %d: must be at least 1 (the number of local workers)", cl.cluster)
	case set["cluster"] && cl.cluster == 0:
		return cli.Usagef("-cluster 0: give the number of local workers, at least 1")
	case cl.bandRows < 0:
		return cli.Usagef("-band-rows %d: must be at least 1 (0: automatic)", cl.bandRows)
	case cl.cluster > 0 && cl.nats != "":
		return cli.Usagef("-cluster starts its own server and workers; -nats uses another server's: give one of them")
	case set["band-rows"] && !cl.distributed():
		return cli.Usagef("-band-rows applies to a distributed registration (-nats or -cluster)")
	case set["name"] && !cl.worker:
		return cli.Usagef("-name names a worker: it applies to -worker")
	case set["name"] && strings.TrimSpace(cl.workerName) == "":
		return cli.Usagef("-name needs a name")
	case set["allow"] && !cl.worker:
		return cli.Usagef("-allow restricts a worker's reads: it applies to -worker")
	case set["allow"] && cl.allow == "":
		return cli.Usagef("-allow needs a folder")
	case cl.via != viaFolder && cl.via != viaStore:
		return cli.Usagef("-tiles-via %q: want %s or %s", cl.via, viaFolder, viaStore)
	case set["tiles-via"] && (!cl.distributed() || cl.worker):
		return cli.Usagef("-tiles-via applies to the client of a distributed registration (-nats or -cluster)")
	case set["restart"] && cl.cluster == 0:
		return cli.Usagef("-restart applies to the local workers of -cluster")
	case set["worker-timeout"] && !cl.distributed():
		return cli.Usagef("-worker-timeout applies to a distributed registration (-nats or -cluster)")
	case set["worker-timeout"] && cl.timeout <= 0:
		return cli.Usagef("-worker-timeout %v: must be positive", cl.timeout)
	case set["nats-server"] && cl.cluster == 0:
		return cli.Usagef("-nats-server is the server -cluster runs: it applies to -cluster")
	}
	cl.workersSet = set["workers"]
	if cl.nats != "" {
		if _, err := natsURL(cl.nats); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	if cl.worker {
		if cl.cluster > 0 {
			return cli.Usagef("-worker and -cluster exclude each other (-cluster starts its workers itself)")
		}
		for _, f := range []string{"dir", "out", "rows", "cols", "generate", "keep", "profile", "band-rows"} {
			if set[f] {
				return cli.Usagef("-worker takes its work from the clients: -%s is theirs", f)
			}
		}
		if c.dir != "" || c.out != "" {
			return cli.Usagef("-worker takes its work from the clients: the tile and output folders are theirs")
		}
		if cl.nats == "" && os.Getenv(cluster.EnvURL) == "" {
			return cli.Usagef("-worker needs the server to join: -nats URL (or $%s)", cluster.EnvURL)
		}
		return nil
	}
	if !cl.distributed() {
		return nil
	}
	if c.generate != "" {
		return cli.Usagef("-generate writes tiles locally: it takes no -nats or -cluster")
	}
	if c.gpu && cl.nats != "" {
		return cli.Usagef("-gpu with -nats: the registration runs on the workers; give -gpu to them (stitch -worker -gpu)")
	}
	if cl.cluster > 0 {
		path, err := cluster.FindServerExecutable(cl.natsServer)
		if err != nil {
			return cli.Usagef("-cluster %d runs a NATS server: -nats-server %s: %v; or give -nats URL of a running server and start the workers there (stitch -worker)", cl.cluster, cl.natsServer, err)
		}
		cl.natsServer = path
	}
	return nil
}

// natsURL parses a NATS server URL.
func natsURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme) {
		return nil, fmt.Errorf("-nats %s: want a NATS server URL such as nats://HOST:4222", natsconn.Redact(raw))
	}
	return u, nil
}

// connectNATS connects to raw (default $HTGS_NATS_URL) with the token of
// the URL or, when it has none, of $HTGS_NATS_TOKEN.
func connectNATS(raw, name string) (*nats.Conn, error) {
	if raw == "" {
		raw = os.Getenv(cluster.EnvURL)
	}
	if _, err := natsURL(raw); err != nil {
		return nil, err
	}
	nc, err := natsconn.Connect(raw, nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("-nats: %w", err)
	}
	return nc, nil
}

// bandJob is the input of the workers' task: where the tiles are and how
// to register one band of rows of the grid.
type bandJob struct {
	// The tiles: a folder the worker reads at the same path, the pattern
	// with its first number and layout, the time slice.
	Dir, Pattern      string
	Start             int
	Numbering, Origin string
	Time              int
	Rows, Cols        int
	MaxTilePixels     int64
	// The band: rows [Row0, Row1), band Band of Bands.
	Row0, Row1, Band, Bands int
	Options                 align.Options
	// FlatField corrects the tiles; nil: none (or the identity).
	FlatField *align.FlatField
	// Store, with -tiles-via store, is the JetStream object store bucket
	// holding the grid's tile files, which the worker copies into a
	// folder of its own instead of reading Dir; "": read Dir.
	Store string
}

// bandDone is the output of the workers' task.
type bandDone struct {
	Band         int
	Pairs        []stitching.PairTranslation
	Worker, Host string
	Seconds      float64
}

// tileSets keeps the tile set a worker opened last, so that the bands of
// one grid read its file headers once.
//
// With -allow every file a band names is opened through an os.Root at the
// allowed folder: the job's folder, its pattern (".." is refused by
// tileio.ParsePattern anyway) and any symbolic link on the way must stay
// inside it, so a client holding the token cannot make the worker read
// (or hang on) a file elsewhere.
type tileSets struct {
	maxPixels int64    // the worker's -max-tile-pixels (0: no limit); a job's own limit may only be lower
	allow     string   // -allow: the folder the tiles must be under ("" any), absolute, clean, links resolved
	root      *os.Root // -allow: that folder, opened
	mu        sync.Mutex
	key       string
	ts        *tileio.TileSet
	sub       *os.Root // the job folder's root under root, for ts
}

// inside returns the job folder dir relative to -allow. Links are resolved
// on both sides, so a link under the allowed folder cannot lead out of it;
// the os.Root opened on the result checks the same again at each open.
func (s *tileSets) inside(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("tile folder %q: not an absolute path", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("tile folder %q: %w", dir, err)
	}
	rel, err := filepath.Rel(s.allow, real)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return "", fmt.Errorf("tile folder %q: outside the folder this worker may read (-allow %s)", dir, s.allow)
	}
	return rel, nil
}

// open returns the tile set of j's grid, reusing the last one when j names
// the same grid. The worker's task runs one band at a time (Threads(1)),
// so the set replaced here is no longer in use. (With -tiles-via store,
// stagedTiles.band gives the band's tiles instead.)
func (s *tileSets) open(j *bandJob) (*tileio.TileSet, error) {
	s.clamp(j)
	rel := ""
	if s.allow != "" {
		var err error
		if rel, err = s.inside(j.Dir); err != nil {
			return nil, err
		}
	}
	key := fmt.Sprintf("%q %q %d %s %s %d %dx%d %d", j.Dir, j.Pattern, j.Start, j.Numbering, j.Origin, j.Time, j.Rows, j.Cols, j.MaxTilePixels)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == key {
		return s.ts, nil
	}
	pat, err := j.pattern()
	if err != nil {
		return nil, err
	}
	var (
		ts  *tileio.TileSet
		sub *os.Root
	)
	switch {
	case s.root != nil:
		if sub, err = s.root.OpenRoot(rel); err != nil {
			return nil, fmt.Errorf("tile folder %q: outside the folder this worker may read (-allow %s): %w", j.Dir, s.allow, err)
		}
		ts, err = tileio.OpenTileSetIn(sub, pat, j.Rows, j.Cols, j.MaxTilePixels)
	default:
		ts, err = tileio.OpenTileSetLimit(j.Dir, pat, j.Rows, j.Cols, j.MaxTilePixels)
	}
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		return nil, err
	}
	s.close()
	s.key, s.ts, s.sub = key, ts, sub
	return ts, nil
}

// close closes the folder of the last tile set (with -allow).
func (s *tileSets) close() {
	if s.sub != nil {
		s.sub.Close()
		s.key, s.ts, s.sub = "", nil, nil
	}
}

// serveWorker is -worker: it registers the bands clients send until ctx
// is done.
func serveWorker(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	host, _ := os.Hostname()
	name := c.cl.workerName
	if name == "" {
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	nc, err := connectNATS(c.cl.nats, "stitch worker "+name)
	if err != nil {
		return err
	}
	defer nc.Close()
	// A local worker of -cluster stops when its supervisor goes.
	ctx, cancel := cluster.Supervised(ctx)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w := cluster.NewWorker(cluster.WorkerName(name), cluster.Logger(logger))
	gopt := stitching.GraphOptions{Workers: c.workers, GPU: c.gpu}
	var (
		sets  = tileSets{maxPixels: c.maxTilePixels}
		stage stagedTiles
		mu    sync.Mutex // stdout
	)
	defer stage.close()
	if c.cl.allow != "" {
		abs, err := filepath.Abs(c.cl.allow)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return fmt.Errorf("worker %s: -allow: %w", name, err)
		}
		if sets.root, err = os.OpenRoot(abs); err != nil {
			return fmt.Errorf("worker %s: -allow: %w", name, err)
		}
		sets.allow = abs
		defer func() {
			sets.mu.Lock()
			sets.close()
			sets.mu.Unlock()
			sets.root.Close()
		}()
	}
	newTask := func() task.Task[bandJob, bandDone] {
		return task.Map(func(ctx context.Context, j bandJob) (bandDone, error) {
			t0 := time.Now()
			var (
				src tileio.TileSource
				err error
			)
			if j.Store != "" {
				src, err = stage.band(ctx, nc, &sets, &j)
			} else {
				src, err = sets.open(&j)
			}
			if err != nil {
				return bandDone{}, fmt.Errorf("worker %s: band %d of %d: %w", name, j.Band+1, j.Bands, err)
			}
			pts, err := stitching.RegisterBand(ctx, src, j.Row0, j.Row1, j.FlatField, j.Options, gopt)
			if err != nil {
				return bandDone{}, fmt.Errorf("worker %s: band %d of %d: %w", name, j.Band+1, j.Bands, err)
			}
			d := time.Since(t0)
			mu.Lock()
			fmt.Fprintf(stdout, "band %d/%d (rows %d..%d of %d x %d tiles in %s): %d pairs in %v\n",
				j.Band+1, j.Bands, j.Row0, j.Row1-1, j.Rows, j.Cols, j.Dir, len(pts), d.Round(time.Millisecond))
			mu.Unlock()
			return bandDone{Band: j.Band, Pairs: pts, Worker: name, Host: host, Seconds: d.Seconds()}, nil
		})
	}
	if err := cluster.Handle(w, bandTask, newTask, cluster.Version(bandVersion), cluster.Copies(1), cluster.AckWait(bandAckWait)); err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	where := ""
	if c.gpu {
		where = ", on the GPUs"
	}
	fmt.Fprintf(stdout, "worker %s on %s: registering bands of rows, one at a time, with %d workers (copies of each compute task)%s for the clients of %s (interrupt to stop)\n",
		name, host, c.workers, where, natsconn.Redact(nc.ConnectedUrlRedacted()))
	if err := w.Serve(ctx, nc); err != nil {
		return fmt.Errorf("worker %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "worker %s: stopped after %d bands\n", name, w.Stats().Executed)
	return nil
}

// distributed is the client's side of a distributed registration: its
// connection, with -cluster the server process, and the supervisor of the
// workers (with -cluster, of the local worker processes too).
type distributed struct {
	nc     *nats.Conn
	client *cluster.Client
	remote *cluster.Remote[bandJob, bandDone]
	sup    *cluster.Supervisor
	srv    *cluster.ServerProcess // -cluster
	where  string                 // for messages
	rows   int                    // -band-rows
}

// startDistributed connects to -nats, or starts -cluster's server and
// workers, and returns the context the run must use: it is cancelled, with
// the reason as its cause, when no worker has served for -worker-timeout.
// A local worker that dies is reported on stderr and, with -restart,
// started again; the bands it held go to the other workers. Close the
// distributed when the run ends, failed or not.
func startDistributed(ctx context.Context, c *config, stdout, stderr io.Writer) (_ *distributed, _ context.Context, err error) {
	d := &distributed{rows: c.cl.bandRows}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if n := c.cl.cluster; n > 0 {
		if d.srv, err = cluster.StartServerProcess(ctx, c.cl.natsServer); err != nil {
			return nil, nil, fmt.Errorf("-cluster: %w", err)
		}
		if d.nc, err = d.srv.Connect(nats.Name("stitch client")); err != nil {
			return nil, nil, fmt.Errorf("-cluster: %w", err)
		}
		d.where = fmt.Sprintf("the %d local workers of -cluster", n)
	} else {
		if d.nc, err = connectNATS(c.cl.nats, "stitch client"); err != nil {
			return nil, nil, err
		}
		d.where = "the workers of " + natsconn.Redact(c.cl.nats)
	}
	if d.client, err = cluster.NewClient(ctx, d.nc); err != nil {
		return nil, nil, fmt.Errorf("-nats: %w", err)
	}
	// The client's reports (a band delivered again after its worker was
	// lost) name the band.
	label := cluster.InputLabel(func(j bandJob) string {
		return fmt.Sprintf("band %d/%d (rows %d..%d)", j.Band+1, j.Bands, j.Row0, j.Row1-1)
	})
	if d.remote, err = cluster.NewRemote[bandJob, bandDone](d.client, bandTask, cluster.Version(bandVersion), label); err != nil {
		return nil, nil, fmt.Errorf("-nats: %w", err)
	}
	d.sup, ctx = cluster.Supervise(ctx, d.client, bandTask, bandVersion, cluster.Restart(c.cl.restart),
		cluster.WorkerTimeout(c.cl.timeout), cluster.Reports(stderr))
	if n := c.cl.cluster; n > 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, fmt.Errorf("-cluster: finding this program to start the workers: %w", err)
		}
		perWorker := c.localCopies()
		for i := range n {
			name := fmt.Sprintf("local-%d", i+1)
			args := []string{"-worker", "-name", name, "-workers", strconv.Itoa(perWorker)}
			if c.gpu {
				args = append(args, "-gpu")
			}
			if c.dir != "" {
				// Local workers read this run's tiles and nothing else.
				if dir, err := filepath.Abs(c.dir); err == nil {
					args = append(args, "-allow", dir)
				}
			}
			pid, err := d.sup.Start(cluster.LocalWorker{Name: name, Path: exe, Args: args, Env: []string{cluster.EnvURL + "=" + d.srv.AuthURL()}})
			if err != nil {
				return nil, nil, fmt.Errorf("-cluster: %w", err)
			}
			fmt.Fprintf(stdout, "started local worker %s (pid %d, -workers %d)\n", name, pid, perWorker)
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Minute) // then go on with those that joined
		_, err = d.sup.WaitServing(wctx, n)
		wcancel()
		if err != nil {
			return nil, nil, fmt.Errorf("-cluster: waiting for the local workers to join: %w", err)
		}
	}
	return d, ctx, nil
}

// localCopies is the -workers of each local worker of -cluster N: -workers
// when given (each worker's copies of each compute task), otherwise a
// share of this machine's cores (-workers' default) among the N.
func (c *config) localCopies() int {
	if c.cl.workersSet || c.cl.cluster < 1 {
		return c.workers
	}
	return max(1, c.workers/c.cl.cluster)
}

// close stops the local workers (closing their standard input, then
// SIGKILL after a while) and the server, and closes the connection.
func (d *distributed) close() error {
	var errs []error
	if d.sup != nil {
		if err := d.sup.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.client != nil {
		if err := d.client.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if d.nc != nil {
		d.nc.Close()
	}
	if d.srv != nil {
		if err := d.srv.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("-cluster: %w", err))
		}
	}
	return errors.Join(errs...)
}

// waitWorkers waits until at least n live workers serve the band task and
// returns them; it says once on w (unless nil) that it waits. The
// supervisor's context bounds the wait (-worker-timeout).
func (d *distributed) waitWorkers(ctx context.Context, n int, w io.Writer) ([]cluster.WorkerInfo, error) {
	said := false
	for {
		ours, err := d.sup.Serving(ctx)
		if err != nil {
			return nil, err
		}
		if len(ours) >= n {
			return ours, nil
		}
		if w != nil && !said {
			said = true
			extra := ""
			if all, err := d.client.Workers(ctx); err == nil {
				others := 0
				for _, wi := range all {
					if v, ok := wi.Tasks[bandTask]; ok && v != bandVersion {
						others++
					}
				}
				if others > 0 {
					extra = fmt.Sprintf(" (%d worker(s) serve another version of %s: update them)", others, bandTask)
				}
			}
			fmt.Fprintf(w, "waiting for a worker on %s: start one with %s=TOKEN stitch -worker -nats URL%s\n", d.where, natsconn.EnvToken, extra)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tally is what one worker did in a registration.
type tally struct {
	host         string
	bands, pairs int
	seconds      float64
}

// register returns the RegisterFunc that sends the bands of rows of the
// grid of slice t to the workers and merges their pairs, printing a line
// per band on stdout.
func (d *distributed) register(c *config, t int, gopt stitching.GraphOptions, opt align.Options, stdout io.Writer) stitching.RegisterFunc {
	return func(ctx context.Context, src tileio.TileSource, ff *align.FlatField) (*align.Translations, error) {
		t0 := time.Now()
		live, err := d.waitWorkers(ctx, 1, stdout)
		if err != nil {
			return nil, fmt.Errorf("waiting for workers: %w", err)
		}
		rows, cols := src.Rows(), src.Cols()
		h := d.rows
		if h == 0 {
			h = autoBandRows(rows, len(live))
		}
		bands := splitRows(rows, h)
		dir, err := filepath.Abs(c.dir)
		if err != nil {
			return nil, err
		}
		if ff != nil && ff.Identity() {
			ff = nil // correcting with it changes nothing
		}
		job := bandJob{
			Dir: dir, Pattern: c.pattern, Start: c.start, Numbering: c.numbering, Origin: c.origin, Time: t,
			Rows: rows, Cols: cols, MaxTilePixels: c.maxTilePixels, Bands: len(bands), Options: opt, FlatField: ff,
		}
		if job.MaxTilePixels == 0 {
			job.MaxTilePixels = -1 // no limit, as the client opened them
		}
		if c.cl.via == viaStore {
			bucket, drop, err := d.putTiles(ctx, src, stdout)
			if err != nil {
				return nil, err
			}
			defer drop()
			job.Store = bucket
		}
		fmt.Fprintf(stdout, "registration: %d bands of up to %d rows on %s (%d live)\n", len(bands), h, d.where, len(live))
		g := graph.New[bandJob, bandDone]("registration")
		node := graph.AddTask(g, "band", len(bands), d.remote.Task)
		graph.Connect(g.Input(), node)
		graph.Connect(node, g.Output())
		// A band takes long without any progress this graph can see: its
		// stall report waits longer than the default 10 s.
		var exec *graph.Execution
		opts := append(slices.Clone(gopt.Start), graph.WithStallReport(bandStall, nil),
			graph.WithStarted(func(e *graph.Execution) { exec = e }))
		jobs := func(yield func(bandJob) bool) {
			for i, b := range bands {
				j := job
				j.Band, j.Row0, j.Row1 = i, b[0], b[1]
				if !yield(j) {
					return
				}
			}
		}
		rel := align.NewTranslations(rows, cols)
		seen := make(map[align.Pair]bool)
		total := len(align.Pairs(rows, cols))
		byWorker := map[string]*tally{}
		var bad error
		err = g.Run(ctx, jobs, func(done bandDone) error {
			b := bands[done.Band]
			for _, pt := range done.Pairs {
				p := pt.Pair
				if p.Row < b[0] || p.Row >= b[1] || p.Col < 0 || p.Col >= cols || seen[p] || (p.Dir == align.West && p.Col == 0) || (p.Dir == align.North && p.Row == 0) {
					bad = cmpErr(bad, fmt.Errorf("worker %s sent pair %v for band %d (rows %d..%d), which is not its or came twice", done.Worker, p, done.Band+1, b[0], b[1]-1))
					continue
				}
				seen[p] = true
				rel.Set(p, pt.Translation)
			}
			tw := byWorker[done.Worker]
			if tw == nil {
				tw = &tally{host: done.Host}
				byWorker[done.Worker] = tw
			}
			tw.bands++
			tw.pairs += len(done.Pairs)
			tw.seconds += done.Seconds
			fmt.Fprintf(stdout, "band %d/%d (rows %d..%d): %d pairs by worker %s on %s in %.2fs; %s: %d band(s) so far\n",
				done.Band+1, len(bands), b[0], b[1]-1, len(done.Pairs), done.Worker, done.Host, done.Seconds, done.Worker, tw.bands)
			if gopt.Progress != nil {
				gopt.Progress("registration", len(seen), total)
			}
			return nil
		}, opts...)
		if err != nil {
			return nil, fmt.Errorf("bands on %s: %w", d.where, err)
		}
		if bad != nil {
			return nil, bad
		}
		if len(seen) != total {
			return nil, fmt.Errorf("bands on %s: %d of %d pairs registered", d.where, len(seen), total)
		}
		if gopt.Observe != nil {
			gopt.Observe("registration", exec)
		}
		names := make([]string, 0, len(byWorker))
		for n := range byWorker {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(stdout, "registered %d pairs in %d bands on %d worker(s) in %v:\n", total, len(bands), len(names), time.Since(t0).Round(time.Millisecond))
		for _, n := range names {
			tw := byWorker[n]
			fmt.Fprintf(stdout, "  worker %s on %s: %d band(s), %d pairs, %.2fs busy\n", n, tw.host, tw.bands, tw.pairs, tw.seconds)
		}
		return rel, nil
	}
}

// cmpErr keeps the first error.
func cmpErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// autoBandRows is -band-rows 0: about 3 bands per worker, for balance,
// but bands of at least 4 rows when the grid has 4 per worker, since each
// band reads the row above it again.
func autoBandRows(rows, workers int) int {
	workers = max(workers, 1)
	per := int(math.Ceil(float64(rows) / float64(3*workers)))
	return max(1, per, min(4, int(math.Ceil(float64(rows)/float64(workers)))))
}

// splitRows splits rows into bands of h rows (the last one shorter),
// as [r0, r1) pairs.
func splitRows(rows, h int) [][2]int {
	var out [][2]int
	for r := 0; r < rows; r += h {
		out = append(out, [2]int{r, min(rows, r+h)})
	}
	return out
}

// stitchGrid stitches src, the grid of time slice t: on this machine, or
// with the registration on the workers of -nats or -cluster.
func stitchGrid(ctx context.Context, c *config, src *tileio.TileSet, t int, opt align.Options, gopt stitching.GraphOptions, stdout io.Writer) (*stitching.Result, error) {
	if c.dist == nil {
		return stitching.Stitch(ctx, src, opt, gopt)
	}
	return stitching.StitchRegistered(ctx, src, opt, gopt, c.dist.register(c, t, gopt, opt, stdout))
}

// runDistributed runs the job with the registration on workers: it
// connects (or starts -cluster's server and workers), runs, and stops
// them; a local worker that ended early is the error.
func runDistributed(ctx context.Context, c *config, stdout, stderr io.Writer) error {
	d, dctx, err := startDistributed(ctx, c, stdout, stderr)
	if err != nil {
		return err
	}
	c.dist = d
	err = runJob(dctx, c, stdout, stderr)
	if cause := context.Cause(dctx); err != nil && errors.Is(err, context.Canceled) && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	c.dist = nil
	if st := d.sup.Stats(); st.Deaths > 0 {
		fmt.Fprintf(stdout, "local workers: %d died, %d restarted, %d given up; %d band(s) run again by another worker\n", st.Deaths, st.Restarts, st.GivenUp, d.client.Stats().Redelivered)
	}
	return errors.Join(err, d.close())
}

// putTiles puts the tile files of src into a new object store bucket for
// the workers (-tiles-via store) and returns its name and a function that
// deletes it.
func (d *distributed) putTiles(ctx context.Context, src tileio.TileSource, stdout io.Writer) (string, func(), error) {
	ps, ok := src.(interface{ Path(row, col int) string })
	if !ok {
		return "", nil, fmt.Errorf("-tiles-via store: the tiles are not files")
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		return "", nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	bucket := "HTGS_STITCH_TILES_" + hex.EncodeToString(b[:])
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Description: "stitch: the tiles of one grid, for the workers", Storage: jetstream.FileStorage, TTL: 24 * time.Hour})
	if err != nil {
		return "", nil, fmt.Errorf("-tiles-via store: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteObjectStore(dctx, bucket)
	}
	t0 := time.Now()
	var bytes int64
	for r := range src.Rows() {
		for c := range src.Cols() {
			path := ps.Path(r, c)
			data, err := os.ReadFile(path)
			if err == nil {
				_, err = obs.PutBytes(ctx, filepath.Base(path), data)
			}
			if err != nil {
				drop()
				return "", nil, fmt.Errorf("-tiles-via store: %w", err)
			}
			bytes += int64(len(data))
		}
	}
	fmt.Fprintf(stdout, "tiles: %d files (%.1f MiB) put in the object store in %v\n", src.Rows()*src.Cols(), float64(bytes)/(1<<20), time.Since(t0).Round(time.Millisecond))
	return bucket, drop, nil
}
