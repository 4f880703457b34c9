package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/task"
)

// Worker runs registered task implementations for the clients of a
// namespace. A worker process is a normal Go program:
//
//	w := cluster.NewWorker()
//	cluster.Handle(w, "features", newFeatures, cluster.Copies(4), cluster.Version("v2"))
//	err := w.Serve(ctx, nc)
//
// Each handled task has one durable JetStream consumer shared by every
// worker serving it, so the stream hands each input to one worker; a worker
// pulls an input only when one of its copies is free.
type Worker struct {
	cfg      config
	opts     []Option
	host     string
	handlers map[string]handler
	order    []string

	executed atomic.Int64
	refused  atomic.Int64
	serving  atomic.Bool
	acks     sync.WaitGroup // answers waiting for the result stream
	quit     chan struct{}  // closed when Serve's copies have stopped
	// hdrWorker and hdrHost are the values of a result's hWorker and
	// hHost headers, shared by every result (no one changes them).
	hdrWorker, hdrHost []string
	// ansHead starts every answer frame to a direct request (answerHead);
	// frames holds the buffers of those frames (*[]byte).
	ansHead []byte
	frames  sync.Pool

	// afterAnswer, if set (by tests), runs after a result is stored and
	// before its input is acknowledged.
	afterAnswer func()
	syncAck     bool
}

// handler is one registered task, with its types erased.
type handler struct {
	name string // the task's name
	key  string // the name it is served under: name, or name_cK for clone K
	tc   taskConfig
	// newCopy makes one copy: init runs its Initialize, exec runs one input
	// (the decoded payload) and returns the encoded outputs, shut its
	// Shutdown.
	newCopy func() workerCopy
}

type workerCopy struct {
	init func(ctx context.Context, info task.Info) error
	exec func(ctx context.Context, data []byte) (out []byte, n int, malformed bool, err error)
	shut func(ctx context.Context) error
}

// NewWorker returns a worker with no tasks yet. Options must match its
// clients' (Namespace); WorkerName names it in results and in the worker
// directory.
func NewWorker(opts ...Option) *Worker {
	host, _ := os.Hostname()
	return &Worker{opts: opts, host: host, handlers: map[string]handler{}}
}

// Handle registers newTask as the implementation of the task name on w.
// It must be called before Serve; registering a name twice, or an invalid
// name, is an error.
func Handle[In, Out any](w *Worker, name string, newTask func() task.Task[In, Out], opts ...TaskOption) error {
	if err := checkName("task", name); err != nil {
		return err
	}
	if w.serving.Load() {
		return fmt.Errorf("cluster: task %q: Handle after Serve", name)
	}
	tc := newTaskConfig(opts)
	key := cloneKey(name, tc.clone)
	if _, dup := w.handlers[key]; dup {
		return fmt.Errorf("cluster: task %q registered twice", key)
	}
	if tc.copies < 1 {
		return fmt.Errorf("cluster: task %q: %d copies", name, tc.copies)
	}
	codec := tc.codec
	w.handlers[key] = handler{name: name, key: key, tc: tc, newCopy: func() workerCopy {
		t := newTask()
		var wc workerCopy
		wc.init = func(ctx context.Context, info task.Info) error {
			if i, ok := t.(task.Initializer); ok {
				return i.Initialize(ctx, info)
			}
			return nil
		}
		wc.shut = func(ctx context.Context) error {
			if s, ok := t.(task.Shutdowner); ok {
				return s.Shutdown(ctx)
			}
			return nil
		}
		wc.exec = func(ctx context.Context, data []byte) ([]byte, int, bool, error) {
			var in In
			if err := codec.Unmarshal(data, &in); err != nil {
				return nil, 0, true, fmt.Errorf("decode input: %w", err)
			}
			em := &collector[Out]{}
			err := t.Execute(ctx, in, em)
			em.mu.Lock()
			em.done = true
			outs := em.outs
			em.mu.Unlock()
			if err != nil {
				return nil, 0, false, err
			}
			if len(outs) == 0 {
				return nil, 0, false, nil
			}
			b, err := codec.Marshal(&outs)
			if err != nil {
				return nil, 0, false, fmt.Errorf("encode outputs: %w", err)
			}
			return b, len(outs), false, nil
		}
		return wc
	}}
	w.order = append(w.order, key)
	return nil
}

// collector is the Emitter of a worker-side copy: it keeps the outputs,
// sent back together when Execute returns.
type collector[T any] struct {
	mu   sync.Mutex
	outs []T
	done bool
}

func (c *collector[T]) Emit(v T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return task.ErrEmitClosed
	}
	c.outs = append(c.outs, v)
	return nil
}

// WorkerStats counts what a worker did.
type WorkerStats struct {
	Executed int64 // inputs executed, successfully or not
	Refused  int64 // messages refused: foreign, malformed or mismatched
}

// Stats returns the worker's counters so far.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{Executed: w.executed.Load(), Refused: w.refused.Load()}
}

// Name returns the worker's name. Call it once Serve has started (it is
// set there), not concurrently with the start.
func (w *Worker) Name() string { return w.cfg.workerName }

// Serve runs the registered tasks on nc until ctx is cancelled, then lets
// the running Executes finish (their inputs are answered and acknowledged),
// runs every copy's Shutdown and returns nil. An input taken but not
// finished when the worker dies is delivered again to another worker after
// the task's AckWait. Serve returns an error if the streams or consumers
// cannot be set up, or if a copy's Initialize fails; a ctx cancelled while
// it sets them up is a stop like any other, and Serve returns nil.
func (w *Worker) Serve(ctx context.Context, nc *nats.Conn) error {
	if !w.serving.CompareAndSwap(false, true) {
		return errors.New("cluster: worker: Serve called twice")
	}
	cfg, err := newConfig(w.opts)
	if err != nil {
		return err
	}
	if cfg.workerName == "" {
		cfg.workerName = w.host + "-" + strconv.Itoa(os.Getpid())
	}
	w.cfg = cfg
	w.hdrWorker, w.hdrHost = []string{cfg.workerName}, []string{w.host}
	w.ansHead = answerHead(cfg.workerName, w.host)
	if len(w.handlers) == 0 {
		return fmt.Errorf("cluster: worker %s: no task registered", cfg.workerName)
	}
	w.quit = make(chan struct{})
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("cluster: worker %s: %w", cfg.workerName, err)
	}
	entry, key := w.directoryEntry()
	st, runs, err := w.setupPatiently(ctx, js, entry, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop before it served: it took nothing
		}
		return fmt.Errorf("cluster: worker %s: %w", cfg.workerName, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	directs, err := w.subscribeDirect(nc, st, runs)
	if err != nil {
		return err
	}
	// The watch: the copies' slots, and the sweeps of direct requests
	// that wait while every copy is busy.
	shortest := startNoticeAfter
	for _, r := range runs {
		shortest = min(shortest, progressEvery(r.h.tc.ackWait))
	}
	var (
		slots  = make([][]*slot, len(runs))
		sweeps sync.WaitGroup
	)
	wt := newWatch(watchTick(shortest), func() bool {
		busy := false
		for _, ss := range slots {
			for _, s := range ss {
				busy = s.tick() || busy
			}
		}
		for _, d := range directs {
			if runCtx.Err() == nil && d.busy.Load() >= d.copies && len(d.in) > 0 && !d.sweeping.Load() {
				sweeps.Add(1)
				go func() {
					defer sweeps.Done()
					w.sweepBusy(runCtx, st, d)
				}()
			}
		}
		return busy
	})
	for i, r := range runs {
		for range r.h.tc.copies {
			slots[i] = append(slots[i], &slot{w: wt})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
		stop()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.heartbeat(runCtx, nc, st, key, entry)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		wt.run(runCtx)
		sweeps.Wait()
	}()
	for _, d := range directs {
		wg.Add(1)
		go func() { // no direct request once Serve ends
			defer wg.Done()
			w.endDirect(runCtx, st, d)
		}()
	}
	for k, r := range runs {
		for i := range r.h.tc.copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.runCopy(runCtx, st, r.h, nc, i, r.d, slots[k][i]); err != nil {
					fail(err)
				}
			}()
		}
	}
	wg.Wait()
	close(w.quit)
	w.acks.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// taskRun is one task a worker serves: its handler, its consumer of the
// work stream, and its direct requests (nil without).
type taskRun struct {
	h    handler
	cons jetstream.Consumer
	d    *directRun
}

// directoryEntry returns the worker's entry in the directory and its key:
// the worker's name with the characters keys do not allow replaced (host
// names have dots).
func (w *Worker) directoryEntry() (entry []byte, key string) {
	cfg := w.cfg
	info := WorkerInfo{Name: cfg.workerName, Host: w.host, PID: os.Getpid(), Tasks: map[string]string{}, Heartbeat: cfg.heartbeat}
	for _, key := range w.order {
		h := w.handlers[key]
		info.Tasks[key] = h.tc.version
		if h.direct() {
			if info.Direct == nil {
				info.Direct = map[string]DirectTask{}
			}
			info.Direct[key] = DirectTask{Copies: h.tc.copies, AckWait: h.tc.ackWait, Proto: directProto}
		}
	}
	entry, _ = json.Marshal(info)
	key = strings.Map(func(r rune) rune {
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, cfg.workerName)
	return entry, key
}

// setupPatiently sets up the worker's streams and consumers and registers
// it in the directory under key. A worker may start before its cluster is
// ready (no JetStream leader yet, or a replicated directory slow to answer
// on a loaded machine): it retries the set-up, registration included, for
// setupPatience before giving up.
func (w *Worker) setupPatiently(ctx context.Context, js jetstream.JetStream, entry []byte, key string) (*stores, []taskRun, error) {
	deadline := time.Now().Add(setupPatience)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		st, runs, err := w.setupOnce(ctx, js, entry, key)
		if err == nil {
			return st, runs, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, nil, err
		}
		w.cfg.log.Warn("cluster: worker set-up, retrying", "worker", w.cfg.workerName, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// setupOnce is one try of setupPatiently.
func (w *Worker) setupOnce(ctx context.Context, js jetstream.JetStream, entry []byte, key string) (*stores, []taskRun, error) {
	st, err := setup(ctx, js, w.cfg)
	if err != nil {
		return nil, nil, err
	}
	var runs []taskRun
	for _, task := range w.order {
		h := w.handlers[task]
		cons, err := js.CreateOrUpdateConsumer(ctx, st.n.workStream(), jetstream.ConsumerConfig{
			Durable:       task,
			Description:   "htgs cluster: workers of task " + task,
			FilterSubject: st.n.work(task),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       h.tc.ackWait,
			MaxAckPending: h.tc.maxAckPending,
			// Every free copy of every worker has one pull request
			// waiting; the server's default (512) would refuse the rest.
			MaxWaiting: max(512, h.tc.maxAckPending),
			MaxDeliver: maxDeliver(h.tc.maxDeliver),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("task %q: consumer: %w", task, err)
		}
		runs = append(runs, taskRun{h: h, cons: cons})
	}
	// Register in the directory (again at every heartbeat) until Serve
	// returns.
	if _, err := st.dir.Put(ctx, key, entry); err != nil {
		return nil, nil, fmt.Errorf("register: %w", err)
	}
	return st, runs, nil
}

// subscribeDirect subscribes to the direct requests of the tasks of runs
// that take them: a queue subscription per task, whose messages the
// connection's reader puts straight into a channel that the free copies
// wait on (no goroutine in between: one wake-up less per request). The
// subscriptions are there before the copies and the heartbeat; clients
// that read the directory before them got the server's "no one listens"
// and used the stream.
func (w *Worker) subscribeDirect(nc *nats.Conn, st *stores, runs []taskRun) ([]*directRun, error) {
	var directs []*directRun
	for i := range runs {
		if !runs[i].h.direct() {
			continue
		}
		copies := runs[i].h.tc.copies
		d := &directRun{in: make(chan *nats.Msg, max(directQueue, 4*copies)), handoff: make(chan *nats.Msg), freed: make(chan struct{}, 1), copies: int32(copies)}
		sub, err := nc.ChanQueueSubscribe(st.n.call(runs[i].h.key), runs[i].h.key, d.in)
		if err != nil {
			for _, d := range directs {
				_ = d.sub.Unsubscribe()
			}
			return nil, fmt.Errorf("cluster: worker %s: task %q: direct requests: %w", w.cfg.workerName, runs[i].h.key, err)
		}
		d.sub = sub
		runs[i].d = d
		directs = append(directs, d)
	}
	return directs, nil
}

// heartbeat puts the worker's entry in the directory at every heartbeat
// until ctx ends, then deletes it (unless the connection is gone: the
// entry then expires by itself).
func (w *Worker) heartbeat(ctx context.Context, nc *nats.Conn, st *stores, key string, entry []byte) {
	t := time.NewTicker(w.cfg.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if !nc.IsConnected() {
				return
			}
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = st.dir.Delete(dctx, key)
			cancel()
			return
		case <-t.C:
			_, _ = st.dir.Put(ctx, key, entry)
		}
	}
}

// setupPatience is how long Serve retries setting up its streams and
// consumers.
const setupPatience = 30 * time.Second

// directRun hands the direct requests of one task to its free copies.
type directRun struct {
	sub *nats.Subscription
	// in receives the requests from the connection's reader: a free copy
	// waits on it. When it is full a request is dropped (its client sends
	// it through the work stream once its worker has been silent for the
	// ack wait); a sweep empties it while every copy is busy.
	in chan *nats.Msg
	// handoff gives a free copy a request a sweep took.
	handoff chan *nats.Msg
	// freed tells a sweep that a copy has become free.
	freed  chan struct{}
	copies int32
	busy   atomic.Int32 // copies running an input
	// sweeping is set while a sweep (sweepBusy) runs: the worker's watch
	// starts one when it sees every copy busy and requests waiting.
	sweeping atomic.Bool
}

// directQueue is the least room of a directRun's channel: requests waiting
// for a copy that is about to be free, or for a sweep's busy answer.
const directQueue = 256

// start counts a copy of d as busy.
func (d *directRun) start() { d.busy.Add(1) }

// done counts a copy of d as free again.
func (d *directRun) done() {
	if d.busy.Add(-1) == d.copies-1 {
		select {
		case d.freed <- struct{}{}:
		default:
		}
	}
}

// direct says whether the worker takes direct requests for h.
func (h handler) direct() bool { return h.tc.directLimit > 0 && h.tc.maxDeliver <= 0 }

// directGrace is how long a direct request waits for a copy that has
// finished an input and is about to wait for the next, before the worker
// answers that it is busy.
const directGrace = time.Millisecond

// sweepBusy answers the direct requests of d that no copy can take: while
// every copy is busy (and ctx is not done) it takes them from d.in and,
// unless a copy becomes free within directGrace (it then hands the request
// over), answers that the worker is busy (the client sends the input
// through the work stream).
func (w *Worker) sweepBusy(ctx context.Context, st *stores, d *directRun) {
	if !d.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer d.sweeping.Store(false)
	for d.busy.Load() >= d.copies && ctx.Err() == nil {
		select {
		case m := <-d.in:
			w.offer(st, d, m)
		case <-d.freed:
		case <-ctx.Done():
		}
	}
}

// endDirect ends d's subscription once ctx is done, answering busy every
// request still received, and returns when the subscription is closed (at
// most 2 s).
func (w *Worker) endDirect(ctx context.Context, st *stores, d *directRun) {
	<-ctx.Done()
	for d.sweeping.Load() { // it ends with ctx
		time.Sleep(time.Millisecond)
	}
	closed := d.sub.StatusChanged(nats.SubscriptionClosed)
	if d.sub.Drain() != nil {
		closed = nil
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case m := <-d.in:
			w.busyAnswer(st, m)
		case <-closed:
			for {
				select {
				case m := <-d.in:
					w.busyAnswer(st, m)
				default:
					return
				}
			}
		case <-t.C:
			_ = d.sub.Unsubscribe()
			return
		}
	}
}

// offer hands direct request m to a copy that becomes free within
// directGrace, or answers that the worker is busy.
func (w *Worker) offer(st *stores, d *directRun, m *nats.Msg) {
	t := time.NewTimer(directGrace)
	defer t.Stop()
	select {
	case d.handoff <- m:
	case <-t.C:
		w.busyAnswer(st, m)
	}
}

// busyAnswer tells the client of direct request m that it was not run.
func (w *Worker) busyAnswer(st *stores, m *nats.Msg) {
	if st.n.clientOf(m.Reply) == "" || !strings.HasPrefix(m.Reply, st.n.directPrefix()) {
		return
	}
	req, err := parseRequest(m.Data)
	if err != nil || len(req.id) == 0 {
		return // not a request of this protocol: no answer it could read
	}
	_ = w.sendFrame(st, m.Reply, kindBusy, 0, string(req.id), "", "", nil)
}

// sendFrame sends the answer frame of a direct request to its reply
// subject (see appendAnswer).
func (w *Worker) sendFrame(st *stores, reply, kind string, count int, id, ref, errMsg string, out []byte) error {
	bp := frameBuf(&w.frames)
	*bp = appendAnswer(append((*bp)[:0], w.ansHead...), kind, count, id, ref, errMsg, out)
	err := st.js.Conn().Publish(reply, *bp) // copies the frame
	keepFrameBuf(&w.frames, bp)
	return err
}

// runCopy is one copy of a task: it pulls one input at a time, only when
// it is free, until ctx is cancelled. It speaks JetStream's pull protocol
// on a subscription of its own that lives as long as the copy: a pull
// request for one message, then the message or a status (408: the request
// expired). While its pull request waits, it also takes the task's direct
// requests (d, nil if none).
func (w *Worker) runCopy(ctx context.Context, st *stores, h handler, nc *nats.Conn, thread int, d *directRun, sl *slot) error {
	wc := h.newCopy()
	info := task.Info{Task: h.name, Copy: thread, Copies: h.tc.copies, Clones: 1}
	if h.tc.clone >= 0 {
		info.Clone, info.Clones = h.tc.clone, 0 // the clone count is the graph's
	}
	if err := guard(func() error { return wc.init(task.WithInfo(ctx, info), info) }); err != nil {
		return fmt.Errorf("cluster: worker %s: task %q (copy %d) initialize: %w", w.cfg.workerName, h.name, thread, err)
	}
	defer func() {
		if err := guard(func() error { return wc.shut(context.WithoutCancel(ctx)) }); err != nil {
			w.cfg.log.Error("cluster: shutdown", "worker", w.cfg.workerName, "task", h.name, "thread", thread, "err", err)
		}
	}()
	inbox := nc.NewInbox()
	msgs := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		return fmt.Errorf("cluster: worker %s: task %q (copy %d): %w", w.cfg.workerName, h.name, thread, err)
	}
	defer sub.Unsubscribe()
	var fast, handoff chan *nats.Msg
	if d != nil {
		fast, handoff = d.in, d.handoff
	}
	next := "$JS.API.CONSUMER.MSG.NEXT." + st.n.workStream() + "." + h.key
	req := []byte(`{"batch":1,"expires":` + strconv.FormatInt(w.cfg.pullWait.Nanoseconds(), 10) + `}`)
	ectx := task.WithInfo(ctx, info)
	// lost fires when the pull request has had no answer at all for
	// PullWait and a half: it was lost.
	lost := time.NewTimer(time.Hour)
	lost.Stop()
	defer lost.Stop()
	waiting := false   // a pull request is out
	var held *nats.Msg // its answer, received while a direct request ran
	for ctx.Err() == nil || waiting {
		if !waiting && ctx.Err() == nil {
			if err := nc.PublishRequest(next, inbox, req); err != nil {
				w.cfg.log.Warn("cluster: pull", "worker", w.cfg.workerName, "task", h.name, "err", err)
				sleep(ctx, 100*time.Millisecond)
				continue
			}
			waiting = true
			lost.Reset(w.cfg.pullWait + 500*time.Millisecond)
		}
		// The pull is not cancelled with ctx: an input delivered to a
		// cancelled pull would wait for its ack wait. Serve's end waits
		// for the request to expire instead, and gives back what it got.
		m := held
		held = nil
		if m == nil {
			f, ho, done := fast, handoff, ctx.Done()
			if ctx.Err() != nil {
				f, ho, done = nil, nil, nil
			}
			var dm *nats.Msg
			select {
			case m = <-msgs:
			case dm = <-f:
			case dm = <-ho:
			case <-lost.C:
				waiting = false // no answer at all: the request was lost
				continue
			case <-done:
				continue
			}
			if dm != nil {
				d.start()
				held = w.runDirect(ectx, st, h, wc, sl, dm, msgs)
				d.done()
				continue
			}
		}
		waiting = false
		lost.Stop()
		if m.Reply == "" { // a status: 408 expired, 409 refused...
			if code := m.Header.Get("Status"); code != "408" && code != "404" && code != "100" {
				w.cfg.log.Warn("cluster: pull", "worker", w.cfg.workerName, "task", h.name, "status", code, "description", m.Header.Get("Description"))
				sleep(ctx, 100*time.Millisecond)
			}
			continue
		}
		if ctx.Err() != nil {
			_ = m.Nak() // taken as the worker stops: give it back at once
			continue
		}
		if d != nil {
			d.start()
		}
		w.handle(ectx, st, h, wc, sl, m, nil)
		if d != nil {
			d.done()
		}
	}
	return nil
}

// runDirect runs direct request dm on copy wc. While it runs, the
// worker's watch tells the client so after startNoticeAfter (or a third
// of the ack wait, if sooner), then every third of the ack wait (through
// the copy's slot sl): a client that hears nothing for an ack wait sends
// the input through the work stream. The copy's pull request stays out
// meanwhile: an input the stream delivers to it (from msgs) is kept and
// reported in progress at the same times, so that it is not delivered
// elsewhere, and returned to be run next.
func (w *Worker) runDirect(ctx context.Context, st *stores, h handler, wc workerCopy, sl *slot, dm *nats.Msg, msgs <-chan *nats.Msg) (held *nats.Msg) {
	every := progressEvery(h.tc.ackWait)
	dr := &directIn{}
	dr.req, dr.err = parseRequest(dm.Data)
	if dr.err == nil {
		dr.id = string(dr.req.id)
	}
	reply, id, t0 := dm.Reply, dr.id, time.Now()
	notify := strings.HasPrefix(reply, st.n.directPrefix()) && st.n.clientOf(reply) != ""
	sl.begin(min(startNoticeAfter, every), every, func() { // under sl's lock
		if notify {
			w.notifyStarted(st, reply, id, t0, 0)
		}
		if held == nil {
			select {
			case held = <-msgs:
				// Its client hears that this worker has it: should this
				// worker die, its report names the worker.
				if r := held.Header.Get(hReply); held.Reply != "" && strings.HasPrefix(r, st.n.ns+".res.") && st.n.clientOf(r) != "" {
					var n uint64
					if md, err := held.Metadata(); err == nil {
						n = md.NumDelivered
					}
					w.notifyStarted(st, r, held.Header.Get(hMsgID), time.Now(), n)
				}
			default:
			}
		}
		if held != nil && held.Reply != "" {
			_ = held.InProgress()
		}
	})
	w.handle(ctx, st, h, wc, nil, dm, dr)
	sl.end() // held is not written after this
	return held
}

// progressEvery is how often a worker reports an input of a task with
// ack wait ackWait in progress.
func progressEvery(ackWait time.Duration) time.Duration {
	return max(ackWait/3, 10*time.Millisecond)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// guard runs f and turns a panic into a *task.PanicError.
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &task.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// handle answers one work message: it checks the headers, runs the task
// (reporting progress while it runs) and publishes the result, then
// acknowledges the input. A message it cannot accept is answered with an
// error if it names a reply subject of this namespace, and terminated so
// that it is not delivered again.
//
// A direct request (dr, its parsed frame; nil for a work message) is
// answered on its reply subject and neither acknowledged nor terminated;
// one not run (the worker stopping) is answered busy.
func (w *Worker) handle(ctx context.Context, st *stores, h handler, wc workerCopy, sl *slot, m *nats.Msg, dr *directIn) {
	hd := m.Header
	direct := dr != nil
	var (
		id, reply string
		delivered uint64
	)
	if direct {
		id, reply = dr.id, m.Reply
		if !strings.HasPrefix(reply, st.n.directPrefix()) {
			reply = ""
		}
	} else {
		id, reply = hd.Get(hMsgID), hd.Get(hReply)
		if md, err := m.Metadata(); err == nil {
			delivered = md.NumDelivered
		}
		if !strings.HasPrefix(reply, st.n.ns+".res.") {
			reply = ""
		}
	}
	if st.n.clientOf(reply) == "" {
		reply = ""
	}
	// term: never deliver m again; giveBack: let another worker run it.
	term, giveBack := func() { _ = m.Term() }, func() { _ = m.Nak() }
	settle := ackOrNak
	if direct {
		term = func() {}
		giveBack = func() { w.busyAnswer(st, m) }
		settle = func(*nats.Msg, bool) {}
	}
	refuse := func(kind string, err error) {
		w.refused.Add(1)
		w.cfg.log.Error("cluster: refused message", "worker", w.cfg.workerName, "task", h.name, "id", id, "err", err)
		if reply != "" && id != "" {
			w.answer(ctx, st, h, reply, id, delivered, nil, 0, kind, err.Error(), direct, func(bool) { term() })
			return
		}
		term()
	}
	if direct {
		if err := w.checkDirect(dr, h); err != nil {
			kind := kindMalformed
			if errors.Is(err, ErrMismatch) {
				kind = kindMismatch
			}
			refuse(kind, err)
			return
		}
		if reply == "" {
			refuse(kindMalformed, fmt.Errorf("%w: direct request %s without a reply subject of namespace %s", ErrMalformed, id, st.n.ns))
			return
		}
	}
	switch {
	case direct:
	case id == "" || reply == "" || hd.Get(hProto) == "":
		refuse(kindMalformed, fmt.Errorf("%w: not a request of namespace %s (missing message id, reply or protocol header)", ErrMalformed, st.n.ns))
		return
	case hd.Get(hProto) != protoVersion:
		refuse(kindMismatch, fmt.Errorf("%w: protocol %q, worker %s speaks %q", ErrMismatch, hd.Get(hProto), w.cfg.workerName, protoVersion))
		return
	case hd.Get(hTask) != h.name:
		refuse(kindMalformed, fmt.Errorf("%w: message for task %q on the subject of task %q", ErrMalformed, hd.Get(hTask), h.name))
		return
	case hd.Get(hVersion) != h.tc.version:
		refuse(kindMismatch, fmt.Errorf("%w: client wants task %q version %q, worker %s has version %q", ErrMismatch, h.name, hd.Get(hVersion), w.cfg.workerName, h.tc.version))
		return
	case hd.Get(hCodec) != h.tc.codec.Name():
		refuse(kindMismatch, fmt.Errorf("%w: client encodes task %q with codec %q, worker %s decodes %q", ErrMismatch, h.name, hd.Get(hCodec), w.cfg.workerName, h.tc.codec.Name()))
		return
	}
	data := m.Data
	if direct {
		data = dr.req.data
	}
	if ref := hd.Get(hRef); ref != "" && !direct {
		var err error
		data, err = st.payload(ctx, ref)
		if err != nil {
			if ctx.Err() != nil {
				giveBack()
				return
			}
			refuse(kindMalformed, fmt.Errorf("%w: input object %s: %v", ErrMalformed, ref, err))
			return
		}
	}

	// Tell the client which worker has its input, if it runs for long
	// enough to be worth it (a result names the worker of shorter ones),
	// and report progress while the task runs, so that a long task keeps
	// its input; a killed worker stops reporting and the input goes
	// elsewhere. (A direct request's: runDirect's.)
	stopProgress := func() {}
	if !direct {
		t0, every, noticed := time.Now(), progressEvery(h.tc.ackWait), false
		sl.begin(min(startNoticeAfter, every), every, func() {
			if !noticed && time.Since(t0) >= sl.w.early(startNoticeAfter) {
				noticed = true
				w.notifyStarted(st, reply, id, t0, delivered)
			}
			_ = m.InProgress()
		})
		stopProgress = sl.end
	}
	var (
		out       []byte
		n         int
		malformed bool
	)
	err := guard(func() error {
		var err error
		out, n, malformed, err = wc.exec(ctx, data)
		return err
	})
	stopProgress()
	if ctx.Err() != nil && err != nil {
		giveBack() // stopped by Serve's end: another worker will run it
		return
	}
	if !malformed {
		w.executed.Add(1)
	}
	switch {
	case malformed:
		refuse(kindMalformed, fmt.Errorf("%w: %v", ErrMalformed, err))
		return
	case err != nil:
		w.cfg.log.Warn("cluster: task failed", "worker", w.cfg.workerName, "task", h.name, "id", id, "err", err)
		w.answer(ctx, st, h, reply, id, delivered, nil, 0, kindTask, err.Error(), direct, func(stored bool) { settle(m, stored) })
	default:
		w.answer(ctx, st, h, reply, id, delivered, out, n, "", "", direct, func(stored bool) {
			if stored && w.afterAnswer != nil {
				w.afterAnswer()
			}
			settle(m, stored)
		})
	}
}

// startNoticeAfter is how long an input runs on a worker before the worker
// tells its client that it has it (see notifyStarted). Shorter inputs send
// no notice, so that small inputs cost no extra message: their result
// names the worker.
const startNoticeAfter = 100 * time.Millisecond

// notifyStarted tells the client whose reply subject is reply that this
// worker has had its input id since t0: a plain NATS message, lost if the
// client is not listening (an older client), which the client's graph
// uses to name the worker while the input runs, and to report an input
// delivered again (delivered, its deliveries by the work stream: 0 for a
// direct request).
func (w *Worker) notifyStarted(st *stores, reply, id string, t0 time.Time, delivered uint64) {
	msg := nats.NewMsg(st.n.started(st.n.clientOf(reply)))
	msg.Header.Set(hID, id)
	msg.Header.Set(hWorker, w.cfg.workerName)
	msg.Header.Set(hHost, w.host)
	msg.Header.Set(hRunning, time.Since(t0).String())
	if delivered > 1 {
		msg.Header.Set(hDelivered, strconv.FormatUint(delivered, 10))
	}
	_ = st.js.Conn().PublishMsg(msg)
}

// answer publishes a result (or an error, if errMsg is set) and, once the
// result stream has stored it or failed to, calls then on another goroutine
// (Serve waits for it) with whether it was stored. The copy that called
// answer is free meanwhile to take its next input. The answer to a direct
// request goes straight to its reply subject, outside the streams, and
// then is called at once.
func (w *Worker) answer(ctx context.Context, st *stores, h handler, reply, id string, delivered uint64, out []byte, n int, kind, errMsg string, direct bool, then func(stored bool)) {
	failed := func(what string, err error) {
		w.cfg.log.Error("cluster: "+what, "worker", w.cfg.workerName, "task", h.name, "id", id, "err", err)
		then(false)
	}
	ref := ""
	if len(out) > st.cfg.inlineLimit {
		// Too large for a message: the result goes to the object store.
		ref = id + ".out"
		if _, err := st.obj.PutBytes(context.WithoutCancel(ctx), ref, out); err != nil {
			failed("store result", err)
			return
		}
		out = nil
	}
	if direct {
		// The answer frame goes straight to the reply subject.
		if err := w.sendFrame(st, reply, kind, n, id, ref, errMsg, out); err != nil {
			failed("send result", err)
			return
		}
		if w.afterAnswer != nil {
			_ = st.js.Conn().Flush() // a test's hook may end the process
		}
		then(true)
		return
	}
	msg := &nats.Msg{Subject: reply, Header: nats.Header{hID: {id}, hWorker: w.hdrWorker, hHost: w.hdrHost, hCount: {strconv.Itoa(n)}}, Data: out}
	if delivered > 1 {
		msg.Header.Set(hDelivered, strconv.FormatUint(delivered, 10))
	}
	if errMsg != "" {
		msg.Header.Set(hErr, errMsg)
		msg.Header.Set(hKind, kind)
	}
	if ref != "" {
		msg.Header.Set(hRef, ref)
	}
	f, err := st.js.PublishMsgAsync(msg, jetstream.WithMsgID(id))
	if err != nil {
		failed("publish result", err)
		return
	}
	w.acks.Add(1)
	wait := func() {
		defer w.acks.Done()
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		quit := w.quit
		for {
			select {
			case <-f.Ok():
				then(true)
			case err := <-f.Err():
				failed("publish result", err)
			case <-t.C:
				failed("publish result", errors.New("no acknowledgement from the result stream"))
			case <-quit: // Serve is ending: wait a little more, not 10 s
				quit = nil
				t.Reset(500 * time.Millisecond)
				continue
			}
			return
		}
	}
	if w.syncAck {
		wait()
	} else {
		go wait()
	}
}

// directIn is a direct request as a worker copy takes it: its parsed
// frame (req, or why it does not parse) and its request id.
type directIn struct {
	req directRequest
	err error
	id  string
}

// checkDirect checks the frame of direct request dr against handler h: the
// protocol (ErrMismatch), the task (ErrMalformed), its version and codec
// (ErrMismatch).
func (w *Worker) checkDirect(dr *directIn, h handler) error {
	switch r := &dr.req; {
	case errors.Is(dr.err, errFrameVersion):
		return fmt.Errorf("%w: worker %s: %w", ErrMismatch, w.cfg.workerName, dr.err)
	case dr.err != nil:
		return dr.err
	case dr.id == "":
		return fmt.Errorf("%w: direct request without an id", ErrMalformed)
	case string(r.task) != h.name:
		return fmt.Errorf("%w: message for task %q on the subject of task %q", ErrMalformed, r.task, h.name)
	case string(r.version) != h.tc.version:
		return fmt.Errorf("%w: client wants task %q version %q, worker %s has version %q", ErrMismatch, h.name, r.version, w.cfg.workerName, h.tc.version)
	case string(r.codec) != h.tc.codec.Name():
		return fmt.Errorf("%w: client encodes task %q with codec %q, worker %s decodes %q", ErrMismatch, h.name, r.codec, w.cfg.workerName, h.tc.codec.Name())
	}
	return nil
}

// ackOrNak acknowledges m if its result was stored, and gives it back for
// another delivery if not.
func ackOrNak(m *nats.Msg, stored bool) {
	if stored {
		_ = m.Ack()
	} else {
		_ = m.Nak()
	}
}

// maxDeliver is the consumer's MaxDeliver for a task option's n.
func maxDeliver(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
