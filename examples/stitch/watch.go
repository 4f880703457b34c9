package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gohtgs/htgs/examples/internal/cli"
	"github.com/gohtgs/htgs/internal/outfile"
	"github.com/gohtgs/htgs/stitching"
	"github.com/gohtgs/htgs/stitching/align"
	"github.com/gohtgs/htgs/stitching/mosaic"
	"github.com/gohtgs/htgs/stitching/tileio"
)

// watchedRun is the outcome of a -watch run's live stitch.
type watchedRun struct {
	res     *stitching.Result // nil: a tile changed after it arrived, the folder is stitched again
	last    time.Time         // when the last tile arrived
	after   time.Duration     // from then to the Result
	partial string            // the provisional positions file, removed once the outputs are in
	preview string            // the provisional mosaic's preview, likewise ("" with -mosaic=false)
	kept    *keptTiles        // tiles the registration handed over, corrected, for the mosaic (nil with -mosaic=false)
	onGPU   bool              // with -gpu: the registration left at the last tile ran on the GPUs (LiveState.OnGPU)
}

// registeredOnGPU reports whether the registration of c's run ran on the
// GPUs: with -gpu, unless -watch registered the pairs live on the CPU.
func (c *config) registeredOnGPU() bool {
	return c.gpu && (c.watched == nil || c.watched.res == nil || c.watched.onGPU)
}

// progressEvery is the shortest interval between two progress lines of
// -watch (and between two writes of the provisional positions file).
const progressEvery = 2 * time.Second

func addWatchFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.watch, "watch", false, "stitch while the acquisition writes the tiles into -dir (which may start empty): each tile enters when its file is complete, in any order; provisional positions go to OUT/PREFIXglobal-positions-T-partial.txt, and the outputs, the same as a run on the finished folder, come once every tile is in")
	fs.DurationVar(&c.watchTimeout, "watch-timeout", 0, "with -watch: end with an error naming the missing tiles when no new tile arrives for this `duration`, such as 10m (0: wait until interrupted)")
	fs.DurationVar(&c.watchPoll, "watch-poll", 0, "with -watch: list the folder at this `interval` instead of following it with inotify (0: inotify where the system has it, else every 100ms)")
}

// checkWatch checks -watch and what goes with it.
func checkWatch(c *config, set map[string]bool) error {
	if !c.watch {
		for _, f := range []string{"watch-timeout", "watch-poll"} {
			if set[f] {
				return cli.Usagef("-%s applies to -watch", f)
			}
		}
		return nil
	}
	switch {
	case c.dir == "":
		return cli.Usagef("-watch needs -dir, the folder the acquisition writes the tiles into")
	case c.generate != "":
		return cli.Usagef("-watch stitches an acquisition: it cannot go with -generate")
	case c.timeSlices != "":
		return cli.Usagef("-watch stitches one acquisition as it comes: it cannot go with -timeslices (stitch the finished slices)")
	case c.assemble:
		return cli.Usagef("-watch cannot go with -assemble-from-metadata")
	case len(c.format.channels) > 0:
		return cli.Usagef("-watch follows one channel: it cannot go with -channels (stitch the finished folder)")
	case c.cl.worker || c.cl.distributed():
		return cli.Usagef("-watch runs in one process: it cannot go with -cluster, -nats or -worker")
	case c.watchTimeout < 0:
		return cli.Usagef("-watch-timeout %v: must be at least 0", c.watchTimeout)
	case c.watchPoll < 0:
		return cli.Usagef("-watch-poll %v: must be at least 0", c.watchPoll)
	}
	return nil
}

// partialPreviewName is the name of the provisional mosaic's preview of
// the outputs names.
func partialPreviewName(names outNames) string {
	return strings.TrimSuffix(names.preview, ".png") + "-partial.png"
}

// writeLivePreview writes the preview of pos (global positions of a grid
// of w x h tiles) into path (replaced atomically) and returns the PNG's
// bytes (nil when nothing is placed yet).
func writeLivePreview(p *mosaic.LivePreview, path string, pos []tileio.GlobalPosition, w, h int) ([]byte, error) {
	img, err := p.Draw(pos, w, h)
	if err != nil || img == nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := mosaic.EncodePreview(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), outfile.WriteFile(path, func(f io.Writer) error {
		_, err := f.Write(buf.Bytes())
		return err
	})
}

// partialName is the name of the provisional positions file of the
// outputs names.
func partialName(names outNames) string {
	return strings.TrimSuffix(names.global, ".txt") + "-partial.txt"
}

// watchGrid follows -dir while the acquisition fills it and stitches the
// tiles as they come (stitching.StitchLive), keeping the provisional
// positions in OUT; once every tile is in it leaves the Result in
// c.watched for the rest of the run, which then goes on as on a finished
// folder. Tiles that stop coming (-watch-timeout, Ctrl-C) end it with an
// error naming them.
func watchGrid(ctx context.Context, c *config, pat tileio.Pattern, opt align.Options, gopt stitching.GraphOptions, live *cli.Live, stdout, stderr io.Writer) error {
	limit := c.maxTilePixels
	if limit == 0 {
		limit = -1
	}
	wopt := tileio.WatchOptions{MaxPixels: limit}
	if c.watchPoll > 0 {
		wopt.Polling, wopt.Poll = true, c.watchPoll
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := tileio.WatchTiles(wctx, c.dir, pat, c.rows, c.cols, wopt)
	if err != nil {
		return fmt.Errorf("-watch: %w", err)
	}
	defer w.Close()
	names := c.sliceNames(c.runSlices()[0])
	partial := filepath.Join(c.out, partialName(names))
	previewPath := ""
	if c.mosaic {
		previewPath = filepath.Join(c.out, partialPreviewName(names))
	}
	timeout := ""
	if c.watchTimeout > 0 {
		timeout = fmt.Sprintf("; ending if no tile comes for %v", c.watchTimeout)
	}
	fmt.Fprintf(stdout, "watching %s for %d x %d tiles named %s, following it with %s%s\n", c.dir, c.rows, c.cols, pat, w.Mode(), timeout)

	// The arrivals pass through here, timed, and stop after -watch-timeout
	// without one.
	arrivals := make(chan tileio.Arrival)
	fwd := &arrivalForwarder{timeout: c.watchTimeout}
	var fwdDone sync.WaitGroup
	fwdDone.Add(1)
	go func() {
		defer fwdDone.Done()
		fwd.run(wctx, w.Arrivals(), arrivals)
	}()
	defer fwdDone.Wait()
	defer stopWatch() // before the wait: the forwarder ends

	up := &watchUpdates{c: c, w: w, live: live, stderr: stderr, partial: partial, previewPath: previewPath}
	lopt := stitching.LiveOptions{Every: progressEvery, Update: up.update}
	var kept *keptTiles
	if c.mosaic {
		// The mosaic takes the tiles as the final registration corrected
		// them, within a budget, rather than reading them again.
		kept = newKeptTiles(c.cols, func(w, h int) int64 { return keptBudget(c, w, h, opt, gopt) })
		lopt.Tile = kept.add
	}
	if bar := gopt.Progress; bar != nil {
		// The lines above say how the live registration goes; the
		// refinement's bar stays.
		gopt.Progress = func(phase string, done, total int) {
			if phase != "registration" {
				bar(phase, done, total)
			}
		}
	}
	src, err := givenSource(c, w)
	if err != nil {
		return err
	}
	res, err := stitching.StitchLive(wctx, src, arrivals, opt, gopt, lopt)
	stopWatch()
	fwdDone.Wait()
	last, timedOut := fwd.state()
	if err != nil {
		return watchError(ctx, c, w, err, timedOut, up.placed, partial, previewPath)
	}
	if c.givenFF != nil {
		res.FlatField = c.givenFF // the tiles came corrected with it
	}
	c.watched = &watchedRun{res: res, last: last, after: time.Since(last), partial: partial, preview: previewPath, kept: kept, onGPU: up.onGPU}
	if changed := w.Changed(); len(changed) > 0 {
		// A tile acquired again after it arrived: what was registered is
		// not what the folder holds. The finished folder is stitched.
		warn(stderr, "-watch: %d tile(s) changed after they arrived (%s): stitching the finished folder again", len(changed), strings.Join(changed, ", "))
		c.watched.res = nil
		if kept != nil {
			kept.drop()
			c.watched.kept = nil
		}
		return nil
	}
	fmt.Fprintf(stdout, "every tile in (the last at %s); stitched %v after it\n", last.Format("15:04:05.000"), c.watched.after.Round(time.Millisecond))
	return nil
}

// arrivalForwarder passes a watcher's arrivals on, noting when the last
// one came, and stops after timeout (if positive) without one.
type arrivalForwarder struct {
	timeout  time.Duration
	mu       sync.Mutex
	last     time.Time
	timedOut bool
}

// run forwards from in to out until in closes, ctx ends or the timeout
// passes, then closes out.
func (f *arrivalForwarder) run(ctx context.Context, in <-chan tileio.Arrival, out chan<- tileio.Arrival) {
	defer close(out)
	var expire <-chan time.Time
	var timer *time.Timer
	if f.timeout > 0 {
		timer = time.NewTimer(f.timeout)
		defer timer.Stop()
		expire = timer.C
	}
	for {
		select {
		case a, ok := <-in:
			if !ok {
				return
			}
			f.mu.Lock()
			f.last = time.Now()
			f.mu.Unlock()
			select {
			case out <- a:
			case <-ctx.Done():
				return
			}
			if timer != nil {
				timer.Reset(f.timeout)
			}
		case <-expire:
			f.mu.Lock()
			f.timedOut = true
			f.mu.Unlock()
			return
		case <-ctx.Done():
			return
		}
	}
}

// state returns when the last arrival came and whether the timeout ended
// the forwarding.
func (f *arrivalForwarder) state() (last time.Time, timedOut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.timedOut
}

// watchUpdates takes StitchLive's updates for -watch: it keeps the
// provisional positions file and the live preview, and prints the progress
// lines.
type watchUpdates struct {
	c           *config
	w           *tileio.Watcher
	live        *cli.Live
	stderr      io.Writer
	partial     string // the provisional positions file
	previewPath string // the provisional mosaic's preview, "" without a mosaic

	placed    int
	onGPU     bool
	preview   *mosaic.LivePreview
	lastPrint time.Time
	lastLine  string
	writeErr  error
	lastImg   []byte // the latest preview's PNG, for the live view
}

// update takes one LiveState.
func (u *watchUpdates) update(s stitching.LiveState) {
	u.placed = len(s.Positions)
	u.onGPU = s.OnGPU
	if u.placed > 0 {
		if err := outfile.WriteFile(u.partial, func(f io.Writer) error {
			return tileio.WriteGlobalPositions(f, s.Positions)
		}); err != nil && u.writeErr == nil {
			u.writeErr = err
			warn(u.stderr, "-watch: the provisional positions: %v", err)
		}
		if u.previewPath != "" && s.Arrived < s.Tiles {
			tw, th := u.w.TileSize()
			if u.preview == nil {
				u.preview = mosaic.NewLivePreview(u.w, u.c.rows, u.c.cols, tw, th)
			}
			img, err := writeLivePreview(u.preview, u.previewPath, s.Positions, tw, th)
			if err != nil && u.writeErr == nil {
				u.writeErr = err
				warn(u.stderr, "-watch: the provisional mosaic: %v", err)
			}
			if img != nil {
				u.lastImg = img
				u.live.Preview(img, watchLine(s))
			}
		} else if u.lastImg != nil && s.Arrived == s.Tiles {
			u.live.Preview(u.lastImg, watchLine(s)+"; every tile is in: the final stitch runs")
		}
	}
	line := watchLine(s)
	if line != u.lastLine && (time.Since(u.lastPrint) >= progressEvery || s.Arrived == s.Tiles) {
		fmt.Fprintln(u.stderr, line)
		u.lastPrint, u.lastLine = time.Now(), line
	}
}

// watchLine is a progress line of -watch.
func watchLine(s stitching.LiveState) string {
	line := fmt.Sprintf("watch: %d of %d tiles in, %d of %d pairs registered, %d tiles placed", s.Arrived, s.Tiles, s.Registered, s.Pairs, s.Placed)
	if s.FlatFieldTiles > 0 && s.FlatFieldArrived < s.FlatFieldTiles {
		line += fmt.Sprintf(" (the final registration waits for the flat field's sample tiles, %d of %d in; %d pairs registered provisionally)",
			s.FlatFieldArrived, s.FlatFieldTiles, s.Provisional)
	}
	if s.OnGPU && s.Registered < s.Pairs {
		line += fmt.Sprintf("; the %d pairs left go to the GPU", s.Pairs-s.Registered)
	}
	return line
}

// watchError words the end of a -watch run whose tiles did not all come.
func watchError(ctx context.Context, c *config, w *tileio.Watcher, err error, timedOut bool, placed int, partial, preview string) error {
	if werr := w.Err(); werr != nil {
		err = werr // a tile the watch refused ended it
	}
	var inc *stitching.IncompleteError
	if !errors.As(err, &inc) {
		return fmt.Errorf("-watch: %w", err)
	}
	why := "the watch ended"
	switch {
	case timedOut:
		why = fmt.Sprintf("no new tile for %v (-watch-timeout)", c.watchTimeout)
	case ctx.Err() != nil:
		why = "interrupted"
	}
	missing := w.Missing()
	var names []string
	for i, m := range missing {
		if i == 20 {
			names = append(names, fmt.Sprintf("and %d more", len(missing)-20))
			break
		}
		n := m.Name
		if m.Why != nil {
			n += fmt.Sprintf(" (there, but not complete: %v)", m.Why)
		}
		names = append(names, n)
	}
	kept := "no tile was placed, so there are no provisional positions"
	if placed > 0 {
		kept = fmt.Sprintf("the provisional positions of the %d tiles placed are kept in %s", placed, partial)
		if preview != "" {
			kept += fmt.Sprintf(", their mosaic's preview in %s", preview)
		}
	}
	return &watchEnded{msg: fmt.Sprintf("-watch: %s with %d of %d tiles missing: %s; %s", why, len(missing), c.rows*c.cols, strings.Join(names, ", "), kept),
		cause: ctx.Err()}
}

// watchEnded is the error of a -watch run whose tiles did not all come;
// it wraps the context's error when interrupted.
type watchEnded struct {
	msg   string
	cause error
}

func (e *watchEnded) Error() string { return e.msg }
func (e *watchEnded) Unwrap() error { return e.cause }

// removePartial removes the provisional positions file and mosaic
// preview of a -watch run whose outputs are in.
func removePartial(c *config, stderr io.Writer) {
	if c.watched == nil {
		return
	}
	for _, p := range []string{c.watched.partial, c.watched.preview} {
		if p == "" {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			warn(stderr, "-watch: %v", err)
		}
	}
}
