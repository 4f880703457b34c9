package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gohtgs/htgs/task"
)

// Client is the graph's side of a cluster: it publishes the inputs of its
// [Remote] tasks to the work stream and receives their results on its own
// result subject, which it consumes for as long as it is open. One Client
// serves any number of Remote tasks and graph runs; it is safe for
// concurrent use.
type Client struct {
	st   *stores
	id   string
	cons jetstream.ConsumeContext
	name string // the result consumer's name

	mu      sync.Mutex
	waiting map[string]*waiter
	closed  bool
	adv     *nats.Subscription // max-deliveries advisories of the work stream
	starts  *nats.Subscription // workers' notices that they took an input
	// The answers to direct requests come on reply slots (see replySlot):
	// free holds those not in use, open every one still subscribed, for
	// Close; nslot names the next.
	free  []*replySlot
	open  map[*replySlot]struct{}
	nslot uint64
	// inflight counts the inputs of each task (by the name it is served
	// under) whose Execute waits, through the stream or direct.
	inflight map[string]int
	bg       sync.WaitGroup // deletions of given-up inputs
	seq      atomic.Uint64

	// The results are acknowledged together, resultAckDelay after the
	// first not yet acknowledged: one write for a burst.
	ackMu   sync.Mutex
	unacked []jetstream.Msg
	acking  []jetstream.Msg // the batch being acknowledged (its buffer is reused)
	ackT    *time.Timer
	ackNow  bool       // closed: a result that still comes is acknowledged at once
	ackRun  sync.Mutex // held while a batch is acknowledged

	// What the worker directory says of direct requests, read again in the
	// background at most every directRefresh.
	dirMu   sync.Mutex
	dirAt   time.Time
	dirBusy bool
	dirCaps map[string]directCap

	// watch tells the waiting Executes when their direct request's worker
	// has been silent for too long and when to check that a worker serves
	// their task (see watch): no timer per input.
	watch     *watch
	stopWatch context.CancelFunc
	watchDone chan struct{}

	// frames holds the buffers of direct request frames (*[]byte).
	frames sync.Pool
	// lastWorker is the worker and host of the last direct result, whose
	// strings the next result from the same worker shares.
	lastWorker atomic.Pointer[[2]string]
	// lastPlace is the placement of the last result (worker and host, no
	// start time), shared by the next results of the same worker.
	lastPlace atomic.Pointer[task.Placement]

	stats clientStats
	// reports, if set (by a Supervisor), also gets each report the client
	// logs, as one line, and whether the worker that had the input is
	// unknown.
	reports atomic.Pointer[func(line string, unknown bool)]
}

// replySlot is a reply subject of the client for direct requests, with
// its subscription: a channel subscription that the Execute using the slot
// reads itself, so that the connection's reader hands the answer straight
// to the waiting Execute (a subscription with a handler would wake its own
// goroutine first, which then wakes the Execute: one goroutine wake-up
// more per item). A slot serves one direct request at a time and is kept
// for the next one once every message for its request has come: the
// answer, a busy answer or the server's 503 (each request gets exactly one
// of them). A slot whose request ended otherwise (cancelled, or sent
// through the work stream after its worker fell silent) may still get a
// late answer, so it is unsubscribed instead of kept.
type replySlot struct {
	subject string
	ch      chan *nats.Msg
	sub     *nats.Subscription
}

// maxFreeSlots bounds the reply slots a client keeps unused.
const maxFreeSlots = 256

// takeSlot returns a free reply slot, or subscribes a new one.
func (c *Client) takeSlot() (*replySlot, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(c.free); n > 0 {
		rs := c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		c.mu.Unlock()
		return rs, nil
	}
	c.nslot++
	// ns.dres.CLIENT.TOKEN: the subject shape of a direct reply
	// (clientOf), with a token per slot instead of per request.
	rs := &replySlot{subject: c.st.n.direct(c.id, c.id+"-r"+strconv.FormatUint(c.nslot, 36)), ch: make(chan *nats.Msg, 4)}
	c.mu.Unlock()
	sub, err := c.st.js.Conn().ChanSubscribe(rs.subject, rs.ch)
	if err != nil {
		return nil, fmt.Errorf("cluster: client %s: reply subscription: %w", c.id, err)
	}
	rs.sub = sub
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = sub.Unsubscribe()
		return nil, ErrClosed
	}
	c.open[rs] = struct{}{}
	return rs, nil
}

// putSlot gives back rs, which served one request: kept for the next if
// every message for that request has come (clean), unsubscribed if not.
func (c *Client) putSlot(rs *replySlot, clean bool) {
	c.mu.Lock()
	if clean && !c.closed && len(c.free) < maxFreeSlots && len(rs.ch) == 0 {
		c.free = append(c.free, rs)
		c.mu.Unlock()
		return
	}
	delete(c.open, rs)
	c.mu.Unlock()
	_ = rs.sub.Unsubscribe()
	for {
		select {
		case m := <-rs.ch: // a late answer that came meanwhile
			if a, err := parseAnswer(m.Data); err == nil && a.kind != kindBusy && len(a.id) > 0 {
				c.stats.mu.Lock()
				c.stats.duplicates++
				c.stats.mu.Unlock()
			}
		default:
			return
		}
	}
}

// directCap is what the live workers of a task offer for direct requests:
// their copies together, and the longest ack wait among them.
type directCap struct {
	copies  int
	silence time.Duration
}

// directRefresh is how often a client reads the worker directory again
// for direct requests, while it sends inputs; directRetry, while it
// sends inputs of a task the directory did not list for them.
const (
	directRefresh = time.Second
	directRetry   = 100 * time.Millisecond
)

// waiter is an Execute (or Call) waiting for the result of its input.
type waiter struct {
	ch chan *result
	// at, for a graph-side copy, is where it says its input runs
	// (task.Placer); nil for Call.
	at *atomic.Pointer[task.Placement]
	// heard is when a worker last said it runs the input (UnixNano).
	heard atomic.Int64
	// nudge wakes the Execute when the client's watch finds quiet (its
	// direct request's worker said nothing for silence) or probe (time to
	// check that a worker serves the task) due. silence, probeAt (UnixNano),
	// quiet and probe are guarded by the client's mu; silence is 0 once
	// the input is not a direct request.
	nudge        chan struct{}
	silence      time.Duration
	probeAt      int64
	quiet, probe bool
	// resent: sent through the work stream after its direct request's
	// worker fell silent.
	resent atomic.Bool
	// task and label name the input in reports: the name its task is
	// served under, and the Remote's InputLabel of it ("" without one).
	task, label string
	// holdMu guards what the client knows of the input's worker, for the
	// reports of a redelivery.
	holdMu     sync.Mutex
	holder     string // the worker that last said it has the input ("" unknown)
	holderHost string
	told       uint64 // the last delivery a report was made for
}

type clientStats struct {
	mu          sync.Mutex
	sent        int64
	direct      int64
	fallback    int64
	results     int64
	duplicates  int64
	redelivered int64
	byWorker    map[string]int64
}

// NewClient sets up the namespace's streams on nc's JetStream (creating
// them if no one has) and starts consuming this client's results. Close
// stops it; nc stays open and remains the caller's.
func NewClient(ctx context.Context, nc *nats.Conn, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("cluster: client: %w", err)
	}
	st, err := setup(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("cluster: client id: %w", err)
	}
	c := &Client{st: st, id: hex.EncodeToString(b[:]), waiting: map[string]*waiter{}, inflight: map[string]int{}, dirCaps: map[string]directCap{}, open: map[*replySlot]struct{}{}}
	c.watch = newWatch(watchTick(cfg.probe), c.watchPass)
	c.ackT = time.AfterFunc(time.Hour, c.ackResults)
	c.ackT.Stop()
	c.stats.byWorker = map[string]int64{}
	c.name = "client-" + c.id
	cons, err := js.CreateOrUpdateConsumer(ctx, st.n.resultStream(), jetstream.ConsumerConfig{
		Name:              c.name,
		Description:       "htgs cluster: results of one client",
		FilterSubject:     st.n.result(c.id),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           resultAckWait,
		InactiveThreshold: time.Minute,
		MaxAckPending:     -1,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: client %s: result consumer: %w", c.id, err)
	}
	// A short expiry makes the consumer notice soon (a missed heartbeat,
	// half the expiry) that its pull request was lost, after a server
	// restart for one.
	c.cons, err = cons.Consume(c.deliver, jetstream.PullExpiry(4*time.Second), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		cfg.log.Debug("cluster: result consumer", "client", c.id, "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("cluster: client %s: consume results: %w", c.id, err)
	}
	c.adv, err = nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+st.n.workStream()+".*", c.maxDelivered)
	if err != nil {
		c.cons.Stop()
		return nil, fmt.Errorf("cluster: client %s: advisories: %w", c.id, err)
	}
	c.starts, err = nc.Subscribe(st.n.started(c.id), c.started)
	if err != nil {
		_ = c.adv.Unsubscribe()
		c.cons.Stop()
		return nil, fmt.Errorf("cluster: client %s: start notices: %w", c.id, err)
	}
	wctx, stop := context.WithCancel(context.Background())
	c.stopWatch, c.watchDone = stop, make(chan struct{})
	go func() {
		defer close(c.watchDone)
		c.watch.run(wctx)
	}()
	c.directFor("") // read the directory now, in the background
	return c, nil
}

// directFor returns what the directory said of the direct requests of
// task key when last read, and reads it again in the background if that
// was more than directRefresh ago.
func (c *Client) directFor(key string) directCap {
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	dc, known := c.dirCaps[key]
	if since := time.Since(c.dirAt); !c.dirBusy && (since >= directRefresh || !known && since >= directRetry) {
		c.dirBusy = true
		c.background(func(ctx context.Context) {
			ws, err := listWorkers(ctx, c.st.dir)
			caps := map[string]directCap{}
			for _, w := range ws {
				for k, d := range w.Direct {
					if _, ok := w.Tasks[k]; !ok || d.Copies < 1 || d.Proto != directProto {
						continue
					}
					dc := caps[k]
					dc.copies += d.Copies
					dc.silence = max(dc.silence, d.AckWait)
					caps[k] = dc
				}
			}
			c.dirMu.Lock()
			defer c.dirMu.Unlock()
			c.dirBusy, c.dirAt = false, time.Now()
			if err == nil {
				c.dirCaps = caps
			}
		})
	}
	return dc
}

// watchPass is the client's watch: it nudges each waiting Execute whose
// direct request's worker has been silent for its silence, or that is due
// to check that a worker serves its task, and says whether any waits.
func (c *Client) watchPass() bool {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiting {
		quiet := w.silence > 0 && !w.quiet && now-w.heard.Load() >= int64(w.silence)
		probe := now >= w.probeAt
		if !quiet && !probe {
			continue
		}
		w.quiet = w.quiet || quiet
		if probe {
			w.probe, w.probeAt = true, now+int64(c.st.cfg.probe)
		}
		select {
		case w.nudge <- struct{}{}:
		default:
		}
	}
	return len(c.waiting) > 0
}

// noDirect forgets, until the directory is read again, that task key has
// workers taking direct requests: the server said none listens.
func (c *Client) noDirect(key string) {
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	delete(c.dirCaps, key)
}

// started records which worker took an input, from the notice the worker
// sends once the input has run on it for a while (startNoticeAfter): the
// graph-side copy waiting for the input then says so in the graph's
// statistics (task.Placer). A notice for an input no one waits for any
// more is dropped.
func (c *Client) started(m *nats.Msg) {
	worker := m.Header.Get(hWorker)
	if worker == "" {
		return
	}
	c.mu.Lock()
	w := c.waiting[m.Header.Get(hID)]
	c.mu.Unlock()
	if w != nil {
		w.heard.Store(time.Now().UnixNano())
		c.taken(w, m.Header.Get(hID), worker, m.Header.Get(hHost), deliveries(m.Header), false)
	}
	if w != nil && w.at != nil {
		// The worker says for how long: no need for the clocks to agree.
		ran, _ := time.ParseDuration(m.Header.Get(hRunning))
		w.at.Store(&task.Placement{Worker: worker, Host: m.Header.Get(hHost), Since: time.Now().Add(-max(ran, 0))})
	}
}

// taken records that worker (on host) has input id of w, delivered n
// times (0: unknown, or once), as its notice or its result (result) says,
// and reports a redelivery: the input is on another worker than the one
// that last said it had it, or delivered more times than last reported.
func (c *Client) taken(w *waiter, id, worker, host string, n uint64, result bool) {
	w.holdMu.Lock()
	prev, prevHost := w.holder, w.holderHost
	w.holder, w.holderHost = worker, host
	again := prev != "" && prev != worker || n > max(w.told, 1)
	if again {
		w.told = max(n, w.told+1)
	}
	delivery := w.told
	w.holdMu.Unlock()
	if !again {
		return
	}
	had := fmt.Sprintf("worker %s on %s, which had it, did not finish it (it died, stopped or lost its connection)", prev, prevHost)
	if prev == "" {
		had = fmt.Sprintf("the worker that had it did not finish it (it died, stopped or lost its connection; which worker is unknown: it had it for less than %v)", startNoticeAfter)
	}
	verb := "delivered again (delivery %d) to"
	if result {
		verb = "run again (delivery %d) by"
	}
	c.report(prev == "", fmt.Sprintf("cluster: task %q: %s "+verb+" worker %s on %s: %s", w.task, w.what(id), delivery, worker, host, had),
		"task", w.task, "input", id, "label", w.label, "worker", worker, "host", host, "previous", prev, "previous_host", prevHost, "delivery", delivery)
}

// silent reports that the worker of direct request id of w said nothing
// for wait, its ack wait, and that the input goes through the work stream;
// a worker taking it there is then not reported again.
func (c *Client) silent(w *waiter, id string, wait time.Duration) {
	w.holdMu.Lock()
	prev, prevHost := w.holder, w.holderHost
	w.holder, w.holderHost = "", ""
	w.holdMu.Unlock()
	who := fmt.Sprintf("worker %s on %s, which had it,", prev, prevHost)
	if prev == "" {
		who = "its worker (which one is unknown: it never said)"
	}
	c.report(prev == "", fmt.Sprintf("cluster: task %q: %s: %s said nothing for %v (its ack wait): it died or lost its connection; sent again through the work stream", w.task, w.what(id), who, wait),
		"task", w.task, "input", id, "label", w.label, "previous", prev, "previous_host", prevHost)
}

// deliveries returns the hDelivered of h, 0 if none.
func deliveries(h nats.Header) uint64 {
	v := h.Get(hDelivered)
	if v == "" {
		return 0 // no parse: its error allocates
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// what names the input id of w in a report: its label and id.
func (w *waiter) what(id string) string {
	if w.label == "" {
		return "input " + id
	}
	return w.label + " (input " + id + ")"
}

// report logs what the client noticed of its inputs' workers (a warning:
// an input delivered again, a worker fallen silent) on its Logger and
// hands the line to the Supervisor watching it, if any, saying whether the
// worker that had the input is unknown (the Supervisor then names the
// workers lost lately).
func (c *Client) report(unknown bool, line string, attrs ...any) {
	c.st.cfg.log.Warn(line, attrs...)
	if f := c.reports.Load(); f != nil {
		(*f)(line, unknown)
	}
}

// sentAny reports whether the client has sent an input yet.
func (c *Client) sentAny() bool {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	return c.stats.sent > 0
}

// maxDelivered fails the Execute whose input the work stream gave up on:
// delivered MaxDeliver times and never acknowledged (each worker that took
// it died or stopped: a poison input). The advisory names the input by its
// sequence in the work stream; the input, still there, names its request
// (its message ID), and is then removed from the stream.
func (c *Client) maxDelivered(m *nats.Msg) {
	var adv struct {
		Consumer   string `json:"consumer"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if json.Unmarshal(m.Data, &adv) != nil || adv.StreamSeq == 0 {
		return
	}
	c.background(func(ctx context.Context) {
		str, err := c.st.js.Stream(ctx, c.st.n.workStream())
		if err != nil {
			return
		}
		in, err := str.GetMsg(ctx, adv.StreamSeq)
		if err != nil {
			return
		}
		id := in.Header.Get(hMsgID)
		c.mu.Lock()
		_, ok := c.waiting[id]
		c.mu.Unlock()
		if !ok {
			return // another client's input, or one no one waits for
		}
		c.hand(id, &result{kind: kindPoison, errMsg: fmt.Sprintf("input delivered %d times to workers of %s, never answered (each worker died or stopped): given up", adv.Deliveries, adv.Consumer)})
		_ = str.DeleteMsg(ctx, adv.StreamSeq)
	})
}

// withdraw removes input seq from the work stream in the background, if it
// is still there (an input a worker is running is removed too; its result
// is dropped).
func (c *Client) withdraw(seq uint64) {
	c.background(func(ctx context.Context) {
		if str, err := c.st.js.Stream(ctx, c.st.n.workStream()); err == nil {
			_ = str.DeleteMsg(ctx, seq)
		}
	})
}

// background runs f on a goroutine of its own, with a 5 s timeout, unless
// the client is closed; Close waits for it.
func (c *Client) background(f func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f(ctx)
	}()
}

// deliver hands one result to the Execute waiting for it; a result nobody
// waits for (a duplicate from a redelivered input, or one for a cancelled
// run) is dropped. The result is acknowledged a little later, with those
// that follow it.
func (c *Client) deliver(m jetstream.Msg) {
	c.ackMu.Lock()
	switch {
	case c.ackNow:
		_ = m.Ack()
	case len(c.unacked) == 0:
		c.ackT.Reset(resultAckDelay)
		fallthrough
	default:
		c.unacked = append(c.unacked, m)
	}
	c.ackMu.Unlock()
	h := m.Headers()
	c.hand(h.Get(hID), headerResult(h, m.Data()))
}

// resultAckDelay is how long a result may stay unacknowledged, so that the
// acknowledgements of a burst of results leave in one write, off the path
// of the results that follow. It is far below the result consumer's ack
// wait, after which a result would come again (and be dropped as a
// duplicate).
const resultAckDelay = 5 * time.Millisecond

// resultAckWait is the result consumer's ack wait: a result the consumer
// sent that never reached the client comes again after it. That happens
// when the consumer's leader goes down (a server lost) while the result is
// on its way: the new leader counts it as delivered and waiting for its
// acknowledgement. With JetStream's default, 30 s, a run losing a server
// stalled for 30 s on such a result (TestClusterLosesOneServer, 1 run in
// about 30 under load).
const resultAckWait = 5 * time.Second

// ackResults acknowledges the results received and not yet acknowledged.
func (c *Client) ackResults() { c.ackBatch(nil) }

// ackBatch acknowledges the results received and not yet acknowledged; with
// a context, it waits until the server confirms the last acknowledgement
// (and with it, the ones before), or ctx is done.
func (c *Client) ackBatch(ctx context.Context) {
	c.ackRun.Lock()
	defer c.ackRun.Unlock()
	c.ackMu.Lock()
	batch := c.unacked
	c.unacked = c.acking[:0]
	c.acking = nil
	c.ackMu.Unlock()
	for i, m := range batch {
		if ctx != nil && i == len(batch)-1 {
			_ = m.DoubleAck(ctx)
		} else {
			_ = m.Ack()
		}
		batch[i] = nil
	}
	if ctx != nil && len(batch) == 0 {
		// A batch the timer sent just before: at least let it reach the
		// server.
		_ = c.st.js.Conn().FlushWithContext(ctx)
	}
	c.ackMu.Lock()
	if c.acking == nil {
		c.acking = batch[:0] // the next batch's buffer
	}
	c.ackMu.Unlock()
}

// result is a worker's answer to one input, from the result stream's
// headers (headerResult) or a direct answer's frame (directResult).
type result struct {
	worker, host string
	kind, errMsg string // a failure: errMsg is not empty
	ref          string // the object holding the payload, if not data
	count        int    // outputs in the payload
	delivered    uint64 // the input's deliveries by the work stream, if more than one
	data         []byte
}

// headerResult returns the result a message of the result stream carries.
func headerResult(h nats.Header, data []byte) *result {
	n, _ := strconv.Atoi(h.Get(hCount))
	return &result{worker: h.Get(hWorker), host: h.Get(hHost), kind: h.Get(hKind), errMsg: h.Get(hErr), ref: h.Get(hRef), count: n, delivered: deliveries(h), data: data}
}

// directResult returns the result of direct answer a, with its worker's
// and host's names shared with the client's last direct result from the
// same worker (no string made per item).
func (c *Client) directResult(a *directAnswer) *result {
	wh := c.lastWorker.Load()
	if wh == nil || wh[0] != string(a.worker) || wh[1] != string(a.host) {
		wh = &[2]string{string(a.worker), string(a.host)}
		c.lastWorker.Store(wh)
	}
	return &result{worker: wh[0], host: wh[1], kind: a.kind, errMsg: string(a.err), ref: string(a.ref), count: a.count, data: a.data}
}

// hand gives res to the Execute waiting for request id, if any.
func (c *Client) hand(id string, res *result) {
	if w := c.claim(id, res); w != nil {
		w.ch <- res
	}
}

// claim takes the Execute waiting for request id out of the waiting ones
// and counts res as its result; with none waiting (its result came
// already, or it gave up), it counts res as a duplicate and returns nil.
func (c *Client) claim(id string, res *result) *waiter {
	c.mu.Lock()
	w, ok := c.waiting[id]
	delete(c.waiting, id)
	c.mu.Unlock()
	c.stats.mu.Lock()
	if ok {
		c.stats.results++
		if res.worker != "" {
			c.stats.byWorker[res.worker]++
		}
		if res.delivered > 0 || w.resent.Load() {
			c.stats.redelivered++
		}
	} else {
		c.stats.duplicates++
	}
	c.stats.mu.Unlock()
	if ok {
		if n := res.delivered; n > 1 && res.worker != "" {
			c.taken(w, id, res.worker, res.host, n, true)
		}
		if worker := res.worker; worker != "" && w.at != nil {
			// The placement without a start is shared by the inputs of the
			// same worker (no one changes a stored one).
			p := c.lastPlace.Load()
			if p == nil || p.Worker != worker || p.Host != res.host {
				p = &task.Placement{Worker: worker, Host: res.host}
				c.lastPlace.Store(p)
			}
			if prev := w.at.Load(); prev != nil && prev.Worker == p.Worker && prev.Host == p.Host && !prev.Since.IsZero() {
				p = &task.Placement{Worker: worker, Host: res.host, Since: prev.Since}
			}
			w.at.Store(p)
		}
		return w
	}
	return nil
}

// Close stops consuming results and deletes this client's consumer;
// Executes still waiting fail with [ErrClosed]. The NATS connection stays
// open.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for id, w := range c.waiting {
		close(w.ch)
		delete(c.waiting, id)
	}
	slots := c.open
	c.open, c.free = nil, nil
	c.mu.Unlock()
	for rs := range slots {
		_ = rs.sub.Unsubscribe()
	}
	c.stopWatch()
	<-c.watchDone
	_ = c.adv.Unsubscribe()
	_ = c.starts.Unsubscribe()
	c.cons.Stop()
	<-c.cons.Closed()
	c.ackMu.Lock()
	c.ackNow = true
	c.ackT.Stop()
	c.ackMu.Unlock()
	// Acknowledged results leave the stream; acknowledgements that reach
	// the consumer after it is deleted are lost, and their results would
	// stay until the stream's MaxAge: wait for the last one.
	if c.st.js.Conn().IsConnected() {
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.ackBatch(actx)
		acancel()
	} else {
		c.ackBatch(nil)
	} // before the consumer goes: acknowledged results leave the stream
	c.bg.Wait()
	if !c.st.js.Conn().IsConnected() {
		return nil // the consumer goes away by itself once inactive
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.st.js.DeleteConsumer(ctx, c.st.n.resultStream(), c.name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("cluster: client %s: close: %w", c.id, err)
	}
	return nil
}

// ClientStats counts what a client received.
type ClientStats struct {
	Sent     int64 // inputs published
	Direct   int64 // of those, sent first as a direct request (DirectLimit)
	Fallback int64 // of those, sent through the work stream after all: a busy worker, none listening, or one silent
	Results  int64 // results delivered to a waiting Execute
	// Duplicates counts results dropped: already delivered, or for a
	// cancelled Execute. (A direct request's answer that comes after its
	// Execute stopped waiting for it, cancelled or sent through the work
	// stream, is dropped unseen if its reply slot is gone by then.)
	Duplicates int64
	// Redelivered counts delivered results whose input had been delivered
	// to a worker before (by the stream, or as a direct request whose
	// worker fell silent).
	Redelivered int64
	ByWorker    map[string]int64 // delivered results per worker name
}

// Stats returns the client's counters so far.
func (c *Client) Stats() ClientStats {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	s := ClientStats{Sent: c.stats.sent, Direct: c.stats.direct, Fallback: c.stats.fallback, Results: c.stats.results, Duplicates: c.stats.duplicates, Redelivered: c.stats.redelivered, ByWorker: map[string]int64{}}
	for k, v := range c.stats.byWorker {
		s.ByWorker[k] = v
	}
	return s
}

// WorkerInfo describes a live worker, as it registers itself.
type WorkerInfo struct {
	Name  string            `json:"name"`
	Host  string            `json:"host"`
	PID   int               `json:"pid"`
	Tasks map[string]string `json:"tasks"` // task name → version
	// Direct lists the tasks of Tasks that the worker also takes as
	// direct requests ([DirectLimit]).
	Direct map[string]DirectTask `json:"direct,omitempty"`
	// Heartbeat is how often the worker renews its entry (0 from workers
	// that do not say): a [Supervisor] reports a worker silent for three
	// of them.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
}

// DirectTask is how a worker takes the direct requests of one task.
type DirectTask struct {
	Copies  int           `json:"copies"`   // its copies of the task: direct requests it runs at a time
	AckWait time.Duration `json:"ack_wait"` // it reports progress on an input every third of it
	// Proto is the version of the direct protocol the worker speaks (0
	// from workers before version 2, whose requests carried headers): a
	// client sends direct requests only to workers of its own version.
	Proto int `json:"proto,omitempty"`
}

// Workers lists the live workers of the namespace, sorted by name.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return listWorkers(ctx, c.st.dir)
}

func listWorkers(ctx context.Context, kv jetstream.KeyValue) ([]WorkerInfo, error) {
	es, err := listEntries(ctx, kv)
	ws := make([]WorkerInfo, len(es))
	for i, e := range es {
		ws[i] = e.WorkerInfo
	}
	return ws, err
}

// workerEntry is a worker's entry in the directory: what it says, and the
// revision of its last renewal.
type workerEntry struct {
	WorkerInfo
	rev uint64
}

// listEntries lists the directory's entries, sorted by worker name.
func listEntries(ctx context.Context, kv jetstream.KeyValue) ([]workerEntry, error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: list workers: %w", err)
	}
	var ws []workerEntry
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // expired meanwhile
		}
		var w WorkerInfo
		if json.Unmarshal(e.Value(), &w) == nil {
			ws = append(ws, workerEntry{w, e.Revision()})
		}
	}
	slices.SortFunc(ws, func(a, b workerEntry) int { return cmp.Compare(a.Name, b.Name) })
	return ws, nil
}

// Remote is a task whose copies run on worker processes: each input is
// encoded, published to the work stream under the task's name, executed by
// whichever worker pulls it, and its outputs come back to the Execute that
// sent it, which emits them downstream. It sits in a graph like any task:
//
//	r, err := cluster.NewRemote[Tile, Features](client, "features")
//	feats := graph.AddTask(g, "features", 64, r.Task)
//
// The graph-side copies only wait, so give the node as many copies as the
// number of inputs the graph should keep in flight across all workers; each
// worker's own window (its Copies) bounds what it takes at a time.
type Remote[In, Out any] struct {
	c        *Client
	name     string
	version  string
	codec    Codec
	perClone bool
	direct   int              // DirectLimit
	label    func(any) string // InputLabel, or nil
	hdr      [4][]string      // the values of hProto, hTask, hVersion and hCodec
	reqHead  []byte           // the start of its direct request frames (requestHead)
	callSubj string           // the subject of its direct requests (not PerClone)
}

// TaskOption configures a [Remote] or a task a [Worker] handles.
type TaskOption interface{ applyTask(*taskConfig) }

type taskOption func(*taskConfig)

func (f taskOption) applyTask(c *taskConfig) { f(c) }

type taskConfig struct {
	version       string
	codec         Codec
	copies        int
	ackWait       time.Duration
	maxAckPending int
	perClone      bool
	clone         int // -1: all inputs
	maxDeliver    int // 0: no limit
	directLimit   int // 0: no direct requests
	label         func(any) string
}

func newTaskConfig(opts []TaskOption) taskConfig {
	c := taskConfig{version: "v0", codec: Gob(), copies: 1, ackWait: 30 * time.Second, maxAckPending: 1000, clone: -1, directLimit: DefaultDirectLimit}
	for _, o := range opts {
		o.applyTask(&c)
	}
	return c
}

// Version sets the version of a task's implementation. A Remote and the
// workers serving it must agree, or the worker refuses the input and both
// sides report [ErrMismatch]. Default "v0".
func Version(v string) TaskOption { return taskOption(func(c *taskConfig) { c.version = v }) }

// WithCodec sets a task's codec (default [Gob]); a Remote and its workers
// must agree.
func WithCodec(codec Codec) TaskOption { return taskOption(func(c *taskConfig) { c.codec = codec }) }

// Copies sets how many copies of a task a worker runs, which is also how
// many of its inputs the worker executes at a time: its window. A copy
// pulls its next input only when it is free. Default 1. Remotes ignore it.
func Copies(n int) TaskOption { return taskOption(func(c *taskConfig) { c.copies = n }) }

// AckWait sets how long an input taken by a worker stays invisible to
// other workers; if the worker neither finishes nor reports progress in
// that time (it was killed), the input is delivered again. Workers report
// progress every third of it while a task runs, so long tasks are safe.
// Default 30 s; the workers' setting wins. Remotes ignore it.
func AckWait(d time.Duration) TaskOption { return taskOption(func(c *taskConfig) { c.ackWait = d }) }

// MaxDeliver sets how many times an input of a task is delivered to
// workers before JetStream gives up on it (default: no limit). An input
// that kills every worker that takes it (a poison input) then fails its
// Execute with [ErrPoison] instead of going round the workers forever. The
// workers' setting wins. Remotes ignore it.
func MaxDeliver(n int) TaskOption { return taskOption(func(c *taskConfig) { c.maxDeliver = n }) }

// MaxAckPending bounds the inputs of a task taken by all workers together
// and not yet finished (JetStream's MaxAckPending). Default 1000; the
// workers' setting wins. Remotes ignore it.
func MaxAckPending(n int) TaskOption {
	return taskOption(func(c *taskConfig) { c.maxAckPending = n })
}

// DefaultDirectLimit is the default of [DirectLimit], 64 KiB.
const DefaultDirectLimit = 64 << 10

// DirectLimit sets the largest encoded input, in bytes, that a Remote
// sends as a direct request before trying the work stream; 0 sends every
// input through the work stream. Default [DefaultDirectLimit] (and never
// above [InlineLimit]).
//
// A direct request is a core NATS request to the workers of the task (a
// queue group: one of them gets it), outside JetStream: it crosses the
// server twice each way with no stream in between, about half the cost of
// a small item through the streams. A Remote sends one only while fewer of
// its inputs are in flight than the live workers have copies of the task
// (from the worker directory), so that under load inputs queue in the work
// stream as before. It keeps the stream's guarantees: a worker with no
// copy free answers "busy" and the input goes through the work stream; no
// worker listening (the server says so), or a worker silent for longer
// than the task's AckWait (it reports progress every third of it while the
// input runs: it died, or the server was lost), sends it through the work
// stream too, which redelivers it from then on; the first result counts
// and a later one is dropped.
//
// On a worker, 0 makes it take no direct request for the task; a worker
// also takes none for a task with [MaxDeliver], since only the stream
// counts deliveries.
func DirectLimit(bytes int) TaskOption {
	return taskOption(func(c *taskConfig) { c.directLimit = max(bytes, 0) })
}

// InputLabel makes a Remote name each input in what its client reports
// (an input delivered again after its worker was lost, say) by label(in),
// "band 3 of 8 (rows 6..8)" for one, besides its request id. label must be
// cheap: it runs for every input. An input of another type than In is
// named by its id alone. Workers ignore it.
func InputLabel[In any](label func(In) string) TaskOption {
	return taskOption(func(c *taskConfig) {
		c.label = func(v any) string {
			if in, ok := v.(In); ok {
				return label(in)
			}
			return ""
		}
	})
}

// PerClone makes a Remote inside an execution pipeline send each input to
// the workers serving its pipeline clone (task.Info.Clone), registered
// with [Clone]: the clone, with its state, runs on those workers, the way a
// clone runs on its own GPU. Workers ignore it.
func PerClone() TaskOption { return taskOption(func(c *taskConfig) { c.perClone = true }) }

// Clone makes a worker serve only clone k of a task whose Remote is
// [PerClone]: the inputs the pipeline's decomposition rule routes to clone
// k. Its copies see Pipeline = k in their task.Info. Remotes ignore it.
func Clone(k int) TaskOption { return taskOption(func(c *taskConfig) { c.clone = k }) }

// cloneKey is the name under which clone k of a task is served: its
// subject token, consumer name and directory entry.
func cloneKey(name string, k int) string {
	if k < 0 {
		return name
	}
	return name + "_c" + strconv.Itoa(k)
}

// NewRemote returns the graph side of the task registered as name by the
// workers. Its Task method is the factory to pass to graph.AddTask.
func NewRemote[In, Out any](c *Client, name string, opts ...TaskOption) (*Remote[In, Out], error) {
	if err := checkName("task", name); err != nil {
		return nil, err
	}
	tc := newTaskConfig(opts)
	return &Remote[In, Out]{c: c, name: name, version: tc.version, codec: tc.codec, perClone: tc.perClone, direct: tc.directLimit, label: tc.label,
		hdr:     [4][]string{{protoVersion}, {name}, {tc.version}, {tc.codec.Name()}},
		reqHead: requestHead(name, tc.version, tc.codec.Name()), callSubj: c.st.n.call(name)}, nil
}

// Name returns the task name the workers registered.
func (r *Remote[In, Out]) Name() string { return r.name }

// Task returns a new graph-side copy of the task, for graph.AddTask. The
// copy is a [task.Placer]: the graph's statistics, pictures, trace and stall
// reports name the worker (and its host) that runs its input, and count the
// inputs each worker ran. While an input runs, its worker is known once the
// input has run there for 100 ms (the worker then sends a notice; shorter
// inputs are named by their result).
func (r *Remote[In, Out]) Task() task.Task[In, Out] { return &remoteCopy[In, Out]{r: r} }

type remoteCopy[In, Out any] struct {
	r  *Remote[In, Out]
	at atomic.Pointer[task.Placement] // where its input runs, or ran last
}

// Placement says which worker has the copy's input (or had its last one);
// it is safe to call at any time.
func (rc *remoteCopy[In, Out]) Placement() task.Placement {
	if p := rc.at.Load(); p != nil {
		return *p
	}
	return task.Placement{}
}

func (rc *remoteCopy[In, Out]) Execute(ctx context.Context, in In, out task.Emitter[Out]) error {
	rc.at.Store(nil) // no worker has this input yet
	clone := -1
	if rc.r.perClone {
		info, ok := task.InfoFrom(ctx)
		if !ok {
			return fmt.Errorf("cluster: task %q: PerClone outside a graph", rc.r.name)
		}
		clone = info.Clone
	}
	outs, err := rc.r.call(ctx, clone, in, &rc.at)
	if err != nil {
		return err
	}
	for _, v := range outs {
		if err := out.Emit(v); err != nil {
			return err
		}
	}
	return nil
}

// Call runs the task on a worker for one input and returns its outputs, in
// the order the worker's Execute emitted them. Call is what each graph-side
// copy's Execute does; it is also usable outside graphs.
// For a PerClone Remote use CallClone.
func (r *Remote[In, Out]) Call(ctx context.Context, in In) ([]Out, error) {
	if r.perClone {
		return nil, fmt.Errorf("cluster: task %q: Call on a PerClone task: use CallClone", r.name)
	}
	return r.call(ctx, -1, in, nil)
}

// CallClone runs the input on the workers serving clone k of a PerClone
// task.
func (r *Remote[In, Out]) CallClone(ctx context.Context, k int, in In) ([]Out, error) {
	if k < 0 {
		return nil, fmt.Errorf("cluster: task %q: clone %d", r.name, k)
	}
	return r.call(ctx, k, in, nil)
}

// call runs in on a worker; at, if not nil, is told which worker has it.
//
// A small input goes first as a direct request while fewer inputs of the
// task are in flight than the workers have copies (see DirectLimit); it
// goes through the work stream if the answer says it was not run, or if
// its worker falls silent. Otherwise it goes through the work stream at
// once.
func (r *Remote[In, Out]) call(ctx context.Context, clone int, in In, at *atomic.Pointer[task.Placement]) ([]Out, error) {
	c := r.c
	st := c.st
	data, err := r.codec.Marshal(&in)
	if err != nil {
		return nil, fmt.Errorf("cluster: task %q: encode input: %w", r.name, err)
	}
	id := c.id + "-" + strconv.FormatUint(c.seq.Add(1), 36)
	key := cloneKey(r.name, clone)
	rc := &remoteCall[In, Out]{r: r, ctx: ctx, id: id, key: key, data: data}
	if r.direct > 0 && len(data) <= min(r.direct, st.cfg.inlineLimit) {
		rc.dc = c.directFor(key)
	}

	w := &waiter{ch: make(chan *result, 1), nudge: make(chan struct{}, 1), at: at, task: key}
	rc.w = w
	if r.label != nil {
		w.label = r.label(in)
	}
	now := time.Now()
	w.probeAt = now.Add(st.cfg.probe).UnixNano()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("cluster: task %q: %w", r.name, ErrClosed)
	}
	direct := c.inflight[key] < rc.dc.copies
	if direct {
		w.heard.Store(now.UnixNano())
	}
	c.waiting[id] = w
	c.inflight[key]++
	c.mu.Unlock()
	c.watch.poke()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, id)
		if c.inflight[key]--; c.inflight[key] == 0 {
			delete(c.inflight, key)
		}
		c.mu.Unlock()
	}()
	defer rc.deleteStoredInput()

	// answers is the direct request's reply slot's channel until the
	// request's last message (its answer, a busy answer or the server's
	// 503) has come; clean then says so, and the slot is kept.
	var (
		answers <-chan *nats.Msg
		rs      *replySlot
		clean   bool
	)
	if direct {
		var err error
		if answers, rs, clean, err = rc.sendDirect(); err != nil {
			return nil, err
		}
		direct = answers != nil
	}
	if rs != nil {
		defer func() { c.putSlot(rs, clean) }()
	}
	c.stats.mu.Lock()
	c.stats.sent++
	if direct {
		c.stats.direct++
	}
	c.stats.mu.Unlock()
	if !direct {
		if err := rc.viaStream(); err != nil {
			return nil, err
		}
	}

	for {
		select {
		case res, ok := <-w.ch:
			if !ok {
				return nil, fmt.Errorf("cluster: task %q: %w", r.name, ErrClosed)
			}
			if direct && rc.ack != nil {
				r.withdraw(rc.ack) // answered directly after all: spare the workers
			}
			return r.decode(ctx, res)
		case m := <-answers:
			none := len(m.Data) == 0 && m.Header.Get("Status") == "503" // no worker listens
			var a directAnswer
			if !none {
				var err error
				if a, err = parseAnswer(m.Data); err != nil || string(a.id) != id {
					continue // not for this request
				}
			}
			answers, clean = nil, true // the request's last message
			if !none && a.kind != kindBusy {
				res := c.directResult(&a)
				if c.claim(id, res) == nil {
					continue // its result came through the stream first: w.ch has it
				}
				if rc.ack != nil {
					r.withdraw(rc.ack) // answered directly after all: spare the workers
				}
				return r.decode(ctx, res)
			}
			// Not run (a busy worker, or none listening): through the work
			// stream.
			if none {
				c.noDirect(key)
			}
			if err := rc.fallback(); err != nil {
				return nil, err
			}
		case <-w.nudge:
			if err := rc.nudged(); err != nil {
				return nil, err
			}
		case err := <-rc.ackErr:
			if err := rc.failed(err); err != nil {
				return nil, err
			}
		case <-rc.retry:
			rc.retry = nil
			if err := rc.viaStream(); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			if rc.ack != nil {
				r.withdraw(rc.ack)
			}
			return nil, ctx.Err()
		}
	}
}

// remoteCall is one input of a Remote on its way to a worker: through a
// direct request, the work stream, or first the one then the other.
type remoteCall[In, Out any] struct {
	r       *Remote[In, Out]
	ctx     context.Context
	id, key string
	data    []byte
	w       *waiter
	dc      directCap

	// msg is the work stream's message, made when the input goes there.
	msg *nats.Msg
	// A publish that fails (the server restarting, a lost connection) is
	// retried with the same message ID: the stream stores the input once.
	// Its acknowledgement is not waited for: only a failure (ackErr)
	// wakes the Execute, and the input's sequence in the work stream is
	// read from the acknowledgement when it is needed (to withdraw the
	// input).
	ack      jetstream.PubAckFuture
	ackErr   <-chan error
	retry    <-chan time.Time
	attempts int
}

// header returns the headers of the input's messages. The headers every
// input of a Remote carries share their values' slices, which no one
// changes (Set replaces a slice).
func (rc *remoteCall[In, Out]) header() nats.Header {
	h := rc.r.hdr
	return nats.Header{hProto: h[0], hTask: h[1], hVersion: h[2], hCodec: h[3], hID: {rc.id}}
}

// streamMsg makes the work stream's message of the input, putting a large
// input in the object store.
func (rc *remoteCall[In, Out]) streamMsg() (*nats.Msg, error) {
	st := rc.r.c.st
	m := &nats.Msg{Subject: st.n.work(rc.key), Header: rc.header()}
	m.Header.Set(hReply, st.n.result(rc.r.c.id))
	m.Data = rc.data
	if len(rc.data) > st.cfg.inlineLimit {
		ref := rc.id + ".in"
		if _, err := st.obj.PutBytes(rc.ctx, ref, rc.data); err != nil {
			return nil, fmt.Errorf("cluster: task %q: store input: %w", rc.r.name, err)
		}
		m.Header.Set(hRef, ref)
		m.Data = nil
	}
	return m, nil
}

// deleteStoredInput deletes the input from the object store, if it went
// there.
func (rc *remoteCall[In, Out]) deleteStoredInput() {
	if rc.msg != nil && rc.msg.Header.Get(hRef) != "" {
		_ = rc.r.c.st.obj.Delete(context.WithoutCancel(rc.ctx), rc.msg.Header.Get(hRef))
	}
}

// publish publishes the input to the work stream, without waiting for the
// acknowledgement.
func (rc *remoteCall[In, Out]) publish() error {
	if rc.msg == nil {
		m, err := rc.streamMsg()
		if err != nil {
			return err
		}
		rc.msg = m
	}
	rc.attempts++
	f, err := rc.r.c.st.js.PublishMsgAsync(rc.msg, jetstream.WithMsgID(rc.id))
	if err == nil {
		rc.ack, rc.ackErr = f, f.Err()
	}
	return err
}

// failed takes a failed publish: it schedules another, or returns the
// error once the attempts are spent or the context is done.
func (rc *remoteCall[In, Out]) failed(err error) error {
	if rc.attempts >= maxPublishAttempts || rc.ctx.Err() != nil {
		return fmt.Errorf("cluster: task %q: publish input (%d attempts): %w", rc.r.name, rc.attempts, err)
	}
	rc.ack, rc.ackErr = nil, nil
	rc.retry = time.After(time.Duration(rc.attempts) * 100 * time.Millisecond)
	return nil
}

// viaStream sends the input through the work stream (at once, or after
// its direct request).
func (rc *remoteCall[In, Out]) viaStream() error {
	if err := rc.publish(); err != nil {
		return rc.failed(err)
	}
	return nil
}

// fallback sends a direct request's input through the work stream.
func (rc *remoteCall[In, Out]) fallback() error {
	c := rc.r.c
	c.mu.Lock()
	rc.w.silence = 0
	c.mu.Unlock()
	c.stats.mu.Lock()
	c.stats.fallback++
	c.stats.mu.Unlock()
	return rc.viaStream()
}

// sendDirect sends the input as a direct request on a reply slot. It
// returns the slot's channel, nil if no request went out (no slot, or a
// failed publish: clean then says the slot may be kept), and an error
// only when the client is closed.
func (rc *remoteCall[In, Out]) sendDirect() (answers <-chan *nats.Msg, rs *replySlot, clean bool, err error) {
	c := rc.r.c
	rs, err = c.takeSlot()
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, nil, false, fmt.Errorf("cluster: task %q: %w", rc.r.name, ErrClosed)
		}
		return nil, nil, false, nil
	}
	// The frame is copied into the connection's buffer by the publish:
	// its buffer serves the next request.
	bp := frameBuf(&c.frames)
	*bp = appendRequest(append((*bp)[:0], rc.r.reqHead...), rc.id, rc.data)
	subject := rc.r.callSubj
	if rc.key != rc.r.name {
		subject = c.st.n.call(rc.key) // a clone's
	}
	err = c.st.js.Conn().PublishRequest(subject, rs.subject, *bp)
	keepFrameBuf(&c.frames, bp)
	if err != nil {
		return nil, rs, true, nil // no request went out
	}
	c.mu.Lock()
	rc.w.silence = rc.dc.silence // the watch checks it from now on
	c.mu.Unlock()
	return rs.ch, rs, false, nil
}

// nudged takes the watch's nudge: a direct request whose worker said
// nothing for a whole ack wait goes through the work stream, and a probe
// checks that some worker serves the task.
func (rc *remoteCall[In, Out]) nudged() error {
	c, w := rc.r.c, rc.w
	c.mu.Lock()
	quiet, probe := w.quiet && w.silence > 0, w.probe
	w.quiet, w.probe = false, false
	c.mu.Unlock()
	if quiet && time.Since(time.Unix(0, w.heard.Load())) < rc.dc.silence {
		quiet = false // heard from meanwhile: the watch looks again
	}
	if quiet {
		w.resent.Store(true) // its worker said nothing for a whole ack wait
		c.silent(w, rc.id, rc.dc.silence)
		if err := rc.fallback(); err != nil {
			return err
		}
	}
	if probe {
		return rc.r.checkServed(rc.ctx, rc.key)
	}
	return nil
}

// withdraw removes the input whose publish ack is from the work stream,
// once it is stored: no one waits for it any more.
func (r *Remote[In, Out]) withdraw(ack jetstream.PubAckFuture) {
	select {
	case pa := <-ack.Ok():
		r.c.withdraw(pa.Sequence)
		return
	default: // not acknowledged yet
	}
	r.c.background(func(ctx context.Context) {
		select {
		case pa := <-ack.Ok():
			if str, err := r.c.st.js.Stream(ctx, r.c.st.n.workStream()); err == nil {
				_ = str.DeleteMsg(ctx, pa.Sequence)
			}
		case <-ack.Err():
		case <-ctx.Done():
		}
	})
}

// maxPublishAttempts bounds the publishes of one input (about 20 s of
// retries in all).
const maxPublishAttempts = 20

// checkServed fails with ErrNoWorker when workers are registered but none
// of them serves r's task.
func (r *Remote[In, Out]) checkServed(ctx context.Context, key string) error {
	ws, err := listWorkers(ctx, r.c.st.dir)
	if err != nil || len(ws) == 0 {
		return nil // no worker yet: keep waiting for one
	}
	var seen []string
	for _, w := range ws {
		if _, ok := w.Tasks[key]; ok {
			return nil
		}
		for t, v := range w.Tasks {
			seen = append(seen, w.Name+":"+t+"@"+v)
		}
	}
	slices.Sort(seen)
	return fmt.Errorf("cluster: task %q: %w (live workers serve %v)", key, ErrNoWorker, seen)
}

func (r *Remote[In, Out]) decode(ctx context.Context, res *result) ([]Out, error) {
	if msg := res.errMsg; msg != "" {
		return nil, &RemoteError{Task: r.name, Worker: res.worker, Host: res.host, Msg: msg, kind: res.kind}
	}
	data := res.data
	if ref := res.ref; ref != "" {
		var err error
		data, err = r.c.st.payload(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("cluster: task %q: result from worker %s: load %s: %w", r.name, res.worker, ref, err)
		}
		_ = r.c.st.obj.Delete(context.WithoutCancel(ctx), ref)
	}
	var outs []Out
	if n := res.count; n > 0 {
		if err := r.codec.Unmarshal(data, &outs); err != nil {
			return nil, fmt.Errorf("cluster: task %q: result from worker %s: %w: %w", r.name, res.worker, ErrMalformed, err)
		}
		if len(outs) != n {
			return nil, fmt.Errorf("cluster: task %q: result from worker %s: %w: %d outputs, header says %d", r.name, res.worker, ErrMalformed, len(outs), n)
		}
	}
	return outs, nil
}
