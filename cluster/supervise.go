package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvSupervised is set in the environment of the worker processes a
// [Supervisor] starts; [Supervised] reads it.
const EnvSupervised = "HTGS_CLUSTER_SUPERVISED"

// Supervised returns a context that is cancelled when this process's
// supervisor goes: when this process was started by a [Supervisor]
// (EnvSupervised is set), that is when its standard input, a pipe from the
// supervisor, closes (the supervisor stops it, or died). Otherwise it is
// ctx with a cancel function. A worker program serves until this context
// is done.
func Supervised(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if os.Getenv(EnvSupervised) == "" {
		return ctx, cancel
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx, cancel
}

// LocalWorker is a worker process for a [Supervisor] to start and watch.
type LocalWorker struct {
	// Name is the worker's name: the one it registers with (WorkerName),
	// so that the supervisor can tell when it serves.
	Name string
	// Path and Args are the program and its arguments (Args without the
	// program's name).
	Path string
	Args []string
	// Env is added to this process's environment (a token, say: never put
	// secrets on a command line).
	Env []string
}

// SuperviseOption configures a [Supervisor].
type SuperviseOption interface{ applySupervise(*superviseConfig) }

// superviseOption is a SuperviseOption made of a function.
type superviseOption func(*superviseConfig)

func (f superviseOption) applySupervise(c *superviseConfig) { f(c) }

type superviseConfig struct {
	restart  bool
	timeout  time.Duration
	stopWait time.Duration
	reports  io.Writer
	output   io.Writer
	poll     time.Duration
}

// Restart sets whether a local worker that dies is started again (default
// true). A worker that dies again within [RestartWindow] of its start
// three times in a row is given up (it cannot start).
func Restart(on bool) SuperviseOption {
	return superviseOption(func(c *superviseConfig) { c.restart = on })
}

// WorkerTimeout sets how long the task may have no live worker serving it
// before the supervisor's context is cancelled with an error saying so
// (default 1 minute). Counted from Supervise, so it also bounds the wait
// for the first worker.
func WorkerTimeout(d time.Duration) SuperviseOption {
	return superviseOption(func(c *superviseConfig) { c.timeout = d })
}

// StopWait sets how long Close waits for a worker process to stop after
// closing its standard input before it kills it (default 10 s).
func StopWait(d time.Duration) SuperviseOption {
	return superviseOption(func(c *superviseConfig) { c.stopWait = d })
}

// Reports sets where the supervisor reports, a line each (default:
// discarded): local workers that died, restarts and give-ups; workers, local
// or external, that joined once the client had sent inputs, fell silent
// (their directory entry not renewed for three heartbeats), came back or
// left; and what its client reports: an input delivered again to another
// worker (named with its [InputLabel]), with the worker that had it.
func Reports(w io.Writer) SuperviseOption {
	return superviseOption(func(c *superviseConfig) { c.reports = w })
}

// WorkerOutput sets where the local workers' standard output and error go,
// line by line, each line prefixed with "[name] " (default: discarded; the
// end of each worker's output is kept for the report of its death).
func WorkerOutput(w io.Writer) SuperviseOption {
	return superviseOption(func(c *superviseConfig) { c.output = w })
}

// RestartWindow is how long a restarted worker must live for its death not
// to count as a failed start.
const RestartWindow = 10 * time.Second

// restartAttempts is how many failed starts in a row give a worker up.
const restartAttempts = 3

// Supervisor starts worker processes on this machine, watches them and
// the namespace's worker directory for one task: a local worker that dies
// is reported (its name, pid, exit status and last output) and, unless
// [Restart](false), started again; its unacknowledged inputs go to the
// other workers once their [AckWait] has passed. The supervisor's context
// fails only when no worker, local or joined from elsewhere, has served
// the task for [WorkerTimeout]. A supervisor with no local worker only
// watches the directory, for runs on workers started by others; either
// way it reports (see [Reports]) the workers that join, fall silent or
// leave, and the inputs its client sees delivered again.
type Supervisor struct {
	client        *Client
	task, version string
	host          string // this machine's name, as its workers register it
	cfg           superviseConfig
	fail          context.CancelCauseFunc
	done          chan struct{} // closed by Close: stops the watch and the restarts
	watch         sync.WaitGroup
	out           *lineSink
	hook          func(line string, unknown bool) // the client's reports, while open

	mu       sync.Mutex
	seen     map[string]*seenWorker // the workers serving the task at the last poll
	lost     []lostWorker           // workers that died or fell silent, the last lostMemory
	procs    []*localProc
	served   time.Time // when a worker was last seen serving
	closed   bool
	deaths   int
	restarts int
}

// localProc is one local worker, over its restarts.
type localProc struct {
	spec     LocalWorker
	cmd      *exec.Cmd
	stdin    io.Closer
	tail     *tailWriter
	lines    *prefixLines // to WorkerOutput, or nil
	started  time.Time
	exited   chan struct{} // closed once the current process has been waited for
	failures int           // failed starts in a row
	gaveUp   bool
	dead     bool // not running (between a death and its restart, or given up)
}

// Supervise returns a supervisor of task's workers (those registering
// task at version; any version when it is "") on c's namespace, and a
// context derived from ctx that is cancelled, with the reason as its
// cause, when no worker has served the task for the WorkerTimeout. Start
// local workers with Start; Close stops them.
func Supervise(ctx context.Context, c *Client, task, version string, opts ...SuperviseOption) (*Supervisor, context.Context) {
	cfg := superviseConfig{restart: true, timeout: time.Minute, stopWait: 10 * time.Second, poll: 500 * time.Millisecond}
	for _, o := range opts {
		o.applySupervise(&cfg)
	}
	ctx, fail := context.WithCancelCause(ctx)
	host, _ := os.Hostname()
	s := &Supervisor{client: c, task: task, version: version, host: host, cfg: cfg, fail: fail, done: make(chan struct{}), served: time.Now()}
	if cfg.output != nil {
		s.out = &lineSink{w: cfg.output}
	}
	// The client's reports (an input delivered again after its worker
	// was lost) join the supervisor's.
	s.hook = func(line string, unknown bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		if lost := s.lostLately(time.Now()); unknown && len(lost) > 0 {
			line += "; workers lost lately: " + strings.Join(lost, ", ")
		}
		s.report("%s", line)
	}
	c.reports.Store(&s.hook)
	s.watch.Add(1)
	go s.watchLoop(ctx)
	return s, ctx
}

// Start starts a local worker process and supervises it; it returns the
// process id.
func (s *Supervisor) Start(w LocalWorker) (int, error) {
	if err := checkName("worker", w.Name); err != nil {
		return 0, err
	}
	p := &localProc{spec: w, tail: &tailWriter{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("cluster: start worker %s: %w", w.Name, ErrClosed)
	}
	if err := s.spawn(p); err != nil {
		return 0, err
	}
	s.procs = append(s.procs, p)
	return p.cmd.Process.Pid, nil
}

// spawn starts p's process; s.mu is held.
func (s *Supervisor) spawn(p *localProc) error {
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(append(os.Environ(), p.spec.Env...), EnvSupervised+"=1")
	var out io.Writer = p.tail
	if s.out != nil {
		p.lines = &prefixLines{sink: s.out, prefix: "[" + p.spec.Name + "] "}
		out = io.MultiWriter(p.tail, p.lines)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = workerProcAttr()
	cmd.WaitDelay = time.Second // output pipes held by a grandchild
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("cluster: start worker %s: %w", p.spec.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: start worker %s: %w", p.spec.Name, err)
	}
	p.cmd, p.stdin, p.started, p.exited, p.dead = cmd, stdin, time.Now(), make(chan struct{}), false
	go s.wait(p, cmd, p.exited)
	return nil
}

// wait waits for one process of p, then reports its death and restarts
// it, unless the supervisor is closing.
func (s *Supervisor) wait(p *localProc, cmd *exec.Cmd, exited chan struct{}) {
	err := cmd.Wait()
	if p.lines != nil {
		p.lines.flush()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	close(exited)
	p.dead = true
	if s.closed {
		return
	}
	s.deaths++
	s.lose(lostWorker{name: p.spec.Name, pid: cmd.Process.Pid, host: s.host, at: time.Now(), how: "died"})
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	lived := time.Since(p.started)
	if lived < RestartWindow {
		p.failures++
	} else {
		p.failures = 0
	}
	what := "not restarted (restarts are off)"
	var delay time.Duration
	switch {
	case !s.cfg.restart:
		p.gaveUp = true
	case p.failures >= restartAttempts:
		p.gaveUp = true
		what = fmt.Sprintf("given up: it died within %v of its start %d times in a row", RestartWindow, p.failures)
	default:
		delay = time.Duration(1<<max(p.failures-1, 0)) * 500 * time.Millisecond
		what = fmt.Sprintf("restarting it in %v", delay)
	}
	s.report("cluster: worker %s (pid %d) died after %v: %s; its inputs go to the other workers; %s%s",
		p.spec.Name, cmd.Process.Pid, lived.Round(time.Millisecond), status, what, lastOutput(p.tail.String()))
	if p.gaveUp {
		return
	}
	s.watch.Add(1)
	go func() {
		defer s.watch.Done()
		select {
		case <-s.done:
			return
		case <-time.After(delay):
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		if err := s.spawn(p); err != nil {
			p.gaveUp = true
			s.report("cluster: worker %s: restart failed, given up: %v", p.spec.Name, err)
			return
		}
		s.restarts++
		s.report("cluster: worker %s restarted (pid %d)", p.spec.Name, p.cmd.Process.Pid)
	}()
}

// report writes one line to the reports; s.mu is held.
func (s *Supervisor) report(format string, args ...any) {
	if s.cfg.reports != nil {
		fmt.Fprintf(s.cfg.reports, format+"\n", args...)
	}
}

// lastOutput formats the end of a worker's output for a report.
func lastOutput(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return "; its last output:\n" + s
}

// Serving returns the live workers that serve the task, leaving out local
// workers known to be dead (the directory keeps a dead worker's entry for a
// few heartbeats).
func (s *Supervisor) Serving(ctx context.Context) ([]WorkerInfo, error) {
	es, err := s.serving(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]WorkerInfo, len(es))
	for i, e := range es {
		out[i] = e.WorkerInfo
	}
	return out, nil
}

// serving is Serving with the entries' revisions.
func (s *Supervisor) serving(ctx context.Context) ([]workerEntry, error) {
	all, err := listEntries(ctx, s.client.st.dir)
	if err != nil {
		return nil, err
	}
	sent := s.client.sentAny()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []workerEntry
	for _, w := range all {
		v, ok := w.Tasks[s.task]
		if !ok || s.version != "" && v != s.version {
			continue
		}
		if s.localDead(w.WorkerInfo) {
			continue // a local worker that died, or its previous process
		}
		out = append(out, w)
	}
	now := time.Now()
	if len(out) > 0 {
		s.served = now
	}
	s.track(out, now, sent)
	return out, nil
}

// localDead reports whether w is a local worker known to be dead, or an
// earlier process of one; s.mu is held.
func (s *Supervisor) localDead(w WorkerInfo) bool {
	return w.Host == s.host && slices.ContainsFunc(s.procs, func(p *localProc) bool {
		return p.spec.Name == w.Name && (p.dead || p.cmd.Process.Pid != w.PID)
	})
}

// seenWorker is what the supervisor's watch knows of a worker serving the
// task: its entry's last revision, when that last changed (here, by this
// machine's clock: the worker's may differ), and whether it was reported
// silent.
type seenWorker struct {
	info    WorkerInfo
	rev     uint64
	changed time.Time
	silent  bool
}

// silentBeats is how many heartbeats a worker may miss before the
// supervisor reports it silent.
const silentBeats = 3

// lostWorker is a worker that died (a local one) or fell silent, since at.
type lostWorker struct {
	name, host string
	pid        int
	at         time.Time
	how        string // "died", "silent"
}

// lostMemory is how long the supervisor remembers a lost worker, to name
// it beside an input delivered again whose worker the client does not know.
const lostMemory = time.Minute

// lose records a lost worker; s.mu is held.
func (s *Supervisor) lose(l lostWorker) {
	s.lost = slices.DeleteFunc(s.lost, func(o lostWorker) bool { return l.at.Sub(o.at) > lostMemory })
	s.lost = append(s.lost, l)
}

// lostLately names the workers that died or fell silent in the last
// lostMemory, and those whose entry has not been renewed for over half of
// silentBeats heartbeats (not yet reported silent): the candidates for the
// worker of an input delivered again that the client cannot name. s.mu is
// held.
func (s *Supervisor) lostLately(now time.Time) []string {
	var out []string
	for _, l := range s.lost {
		if now.Sub(l.at) <= lostMemory {
			out = append(out, fmt.Sprintf("%s (pid %d) on %s, %s %v ago", l.name, l.pid, l.host, l.how, now.Sub(l.at).Round(100*time.Millisecond)))
		}
	}
	for _, sw := range s.seen {
		beat := cmp.Or(sw.info.Heartbeat, defaultHeartbeat)
		if quiet := now.Sub(sw.changed); !sw.silent && quiet > silentBeats*beat/2 {
			out = append(out, fmt.Sprintf("%s (pid %d) on %s, not heard from for %v", sw.info.Name, sw.info.PID, sw.info.Host, quiet.Round(100*time.Millisecond)))
		}
	}
	slices.Sort(out)
	return out
}

// track compares the workers serving the task with the last look's and
// reports the changes: a worker that joined once the client has sent
// inputs (a restarted local worker too), one silent for silentBeats
// heartbeats (its inputs go to the others after their ack wait), one back
// from silence, one gone. A local worker's death is reported by wait, not
// here.
//
// sent says whether the client has sent inputs; s.mu is held.
func (s *Supervisor) track(es []workerEntry, now time.Time, sent bool) {
	if s.seen == nil {
		s.seen = map[string]*seenWorker{}
	}
	who := func(w WorkerInfo) string { return fmt.Sprintf("worker %s (pid %d) on %s", w.Name, w.PID, w.Host) }
	live := map[string]bool{}
	for _, e := range es {
		k := e.Name + "\x00" + e.Host + "\x00" + strconv.Itoa(e.PID)
		live[k] = true
		sw := s.seen[k]
		if sw == nil {
			s.seen[k] = &seenWorker{info: e.WorkerInfo, rev: e.rev, changed: now}
			if sent {
				s.report("cluster: %s joined: it serves task %q (%d workers serve it now)", who(e.WorkerInfo), s.task, len(es))
			}
			continue
		}
		beat := cmp.Or(e.Heartbeat, defaultHeartbeat)
		switch {
		case e.rev != sw.rev:
			if sw.silent {
				s.report("cluster: %s renews its entry again after %v of silence", who(e.WorkerInfo), now.Sub(sw.changed).Round(100*time.Millisecond))
			}
			sw.rev, sw.changed, sw.silent = e.rev, now, false
		case !sw.silent && now.Sub(sw.changed) > silentBeats*beat:
			sw.silent = true
			s.lose(lostWorker{name: e.Name, pid: e.PID, host: e.Host, at: sw.changed, how: "silent"})
			s.report("cluster: %s is silent: it has not renewed its directory entry for %v (it does every %v): it died or lost its connection; the inputs it holds go to the other workers once their ack wait passes",
				who(e.WorkerInfo), now.Sub(sw.changed).Round(100*time.Millisecond), beat)
		}
	}
	for k, sw := range s.seen {
		if live[k] {
			continue
		}
		delete(s.seen, k)
		local := sw.info.Host == s.host && slices.ContainsFunc(s.procs, func(p *localProc) bool { return p.spec.Name == sw.info.Name })
		switch {
		case local && s.localDead(sw.info):
			// its death was reported
		case sw.silent:
			s.report("cluster: %s is gone from the directory (silent for %v)", who(sw.info), now.Sub(sw.changed).Round(100*time.Millisecond))
		default:
			s.report("cluster: %s left: it no longer serves task %q (%d workers serve it now)", who(sw.info), s.task, len(es))
		}
	}
}

// watchLoop polls the directory and fails the context when no worker has
// served the task for the timeout.
func (s *Supervisor) watchLoop(ctx context.Context) {
	defer s.watch.Done()
	t := time.NewTicker(s.cfg.poll)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.serving(pctx)
		cancel()
		s.mu.Lock()
		since := time.Since(s.served)
		var why error
		if since >= s.cfg.timeout {
			why = s.noWorkerError(since, err)
		}
		s.mu.Unlock()
		if why != nil {
			s.fail(why)
			return
		}
	}
}

// ErrNoWorkerServed is the cause of a supervisor's context when no worker
// served its task for the WorkerTimeout.
var ErrNoWorkerServed = errors.New("no worker served the task")

// noWorkerError says why the run fails; s.mu is held.
func (s *Supervisor) noWorkerError(since time.Duration, listErr error) error {
	var local []string
	for _, p := range s.procs {
		state := "running, not registered"
		switch {
		case p.gaveUp:
			state = "dead, given up"
		case p.dead:
			state = "dead, restarting"
		}
		local = append(local, fmt.Sprintf("%s (%s)", p.spec.Name, state))
	}
	msg := fmt.Sprintf("cluster: task %q: no worker has served it for %v (-worker-timeout)", s.task, since.Round(100*time.Millisecond))
	if len(local) > 0 {
		msg += "; local workers: " + strings.Join(local, ", ")
	}
	if listErr != nil {
		msg += fmt.Sprintf("; the worker directory: %v", listErr)
	}
	return fmt.Errorf("%s: %w", msg, ErrNoWorkerServed)
}

// WaitServing waits until n workers serve the task, or until at least one
// does and every local worker still running serves it too (no more are
// coming), and returns them. When ctx's deadline passes with some serving,
// it returns those. It fails when ctx is done with none serving, or the
// supervisor's timeout passes with none serving (the context Supervise
// returned says so).
func (s *Supervisor) WaitServing(ctx context.Context, n int) ([]WorkerInfo, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var last []WorkerInfo
	for {
		ws, err := s.Serving(ctx)
		if err == nil {
			last = ws
		}
		if err == nil && len(ws) > 0 {
			if len(ws) >= n {
				return ws, nil
			}
			s.mu.Lock()
			all := true
			for _, p := range s.procs {
				if !p.dead && !slices.ContainsFunc(ws, func(w WorkerInfo) bool { return w.Name == p.spec.Name && w.PID == p.cmd.Process.Pid }) {
					all = false
				}
			}
			s.mu.Unlock()
			if all && len(s.procs) > 0 {
				return ws, nil
			}
		}
		select {
		case <-ctx.Done():
			if len(last) > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return last, nil
			}
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// SupervisorStats counts what a supervisor saw.
type SupervisorStats struct {
	Deaths   int // local worker processes that died (not stopped by Close)
	Restarts int // local worker processes started again
	GivenUp  int // local workers no longer restarted
}

// Stats returns the supervisor's counters so far.
func (s *Supervisor) Stats() SupervisorStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SupervisorStats{Deaths: s.deaths, Restarts: s.restarts}
	for _, p := range s.procs {
		if p.gaveUp {
			st.GivenUp++
		}
	}
	return st
}

// PIDs returns the process ids of the local workers now running, by name.
func (s *Supervisor) PIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for _, p := range s.procs {
		if !p.dead {
			m[p.spec.Name] = p.cmd.Process.Pid
		}
	}
	return m
}

// Close stops the local workers: it closes their standard input (a
// worker's [Supervised] context ends and it finishes what it has), kills
// those still running after StopWait, and waits for them all. It returns
// an error naming each worker that did not stop cleanly.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.client.reports.CompareAndSwap(&s.hook, nil)
	type running struct {
		p      *localProc
		cmd    *exec.Cmd
		exited chan struct{}
	}
	var live []running
	for _, p := range s.procs {
		if !p.dead {
			_ = p.stdin.Close()
			live = append(live, running{p, p.cmd, p.exited})
		}
	}
	s.mu.Unlock()
	s.watch.Wait()
	s.fail(nil)
	deadline := time.NewTimer(s.cfg.stopWait)
	defer deadline.Stop()
	var errs []error
	for _, r := range live {
		select {
		case <-r.exited:
			if st := r.cmd.ProcessState; st != nil && !st.Success() {
				errs = append(errs, fmt.Errorf("cluster: worker %s (pid %d) stopped with %v%s", r.p.spec.Name, r.cmd.Process.Pid, st, lastOutput(r.p.tail.String())))
			}
		case <-deadline.C:
			for _, q := range live {
				_ = q.cmd.Process.Kill()
			}
			<-r.exited
			errs = append(errs, fmt.Errorf("cluster: worker %s (pid %d) did not stop within %v: killed", r.p.spec.Name, r.cmd.Process.Pid, s.cfg.stopWait))
		}
	}
	return errors.Join(errs...)
}

// tailWriter keeps the last tailBytes bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4096

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	return string(b)
}

// lineSink serializes whole lines of several processes to one writer.
type lineSink struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *lineSink) writeLine(line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(line)
}

// prefixLines writes whole lines to a lineSink, each with a prefix.
type prefixLines struct {
	sink   *lineSink
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixLines) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.sink.writeLine(append([]byte(p.prefix), p.buf[:i+1]...))
		p.buf = p.buf[i+1:]
	}
}

// flush writes what is left of a last line without newline.
func (p *prefixLines) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.sink.writeLine(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
}
