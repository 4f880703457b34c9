package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// protoVersion is the version of the message format below; a worker refuses
// messages of another version.
const protoVersion = "1"

// Message headers. Work messages carry hProto, hTask, hVersion, hCodec,
// hReply and the JetStream message ID (the request's ID); results carry hID,
// hWorker, hHost, hCount and, for a failure, hErr and hKind. hRef names an
// object in the object store holding the payload instead of the message.
// The notice a worker sends when an input has run on it for a while (on
// the client's started subject, outside the streams, best effort) carries
// hID, hWorker, hHost and hRunning, and hDelivered for an input the work
// stream delivered more than once.
//
// A direct request (core NATS, on the task's call subject, see
// [DirectLimit]) carries no headers: what they say is in a frame at the
// start of its payload, and of its answer's (see frame.go). The answer is
// a result, or a busy answer (kind kindBusy, no error) saying that the
// worker did not run it.
const (
	hProto   = "Htgs-Proto"
	hTask    = "Htgs-Task"
	hVersion = "Htgs-Version"
	hCodec   = "Htgs-Codec"
	hReply   = "Htgs-Reply"
	hRef     = "Htgs-Ref"
	hID      = "Htgs-Id"
	hWorker  = "Htgs-Worker"
	hHost    = "Htgs-Host"
	hCount   = "Htgs-Count"
	hErr     = "Htgs-Error"
	hKind    = "Htgs-Error-Kind"
	hMsgID   = "Nats-Msg-Id"
	// hRunning is how long the input has run on the worker, in a started
	// notice (a time.Duration's String).
	hRunning = "Htgs-Running"
	// hDelivered is set on a result (and a started notice) whose input
	// was delivered more than once (to a worker that died, or that was
	// stopped): the deliveries so far.
	hDelivered = "Htgs-Delivered"
)

// Error kinds in results.
const (
	kindTask      = "task"      // the task's Execute failed or panicked
	kindMismatch  = "mismatch"  // protocol, version or codec mismatch
	kindMalformed = "malformed" // the message does not decode
	kindPoison    = "poison"    // delivered MaxDeliver times, never answered
	// kindBusy answers a direct request that the worker did not run (no
	// copy free, or stopping): the client sends the input through the
	// work stream instead. Not an error.
	kindBusy = "busy"
)

// Errors a [Remote] and a [Worker] report; test for them with errors.Is.
var (
	// ErrMismatch reports a message whose protocol, task version or codec
	// differs from what the worker registered.
	ErrMismatch = errors.New("cluster: protocol, version or codec mismatch")
	// ErrMalformed reports a message that is not a well-formed request or
	// result: missing headers, or a payload that does not decode.
	ErrMalformed = errors.New("cluster: malformed message")
	// ErrNoWorker reports a task that no live worker serves while other
	// workers are registered (a name mismatch between the graph's side and
	// the workers).
	ErrNoWorker = errors.New("cluster: no worker serves the task")
	// ErrPoison reports an input that JetStream delivered to workers
	// MaxDeliver times without an answer: each worker that took it died
	// or stopped.
	ErrPoison = errors.New("cluster: input given up after its maximum deliveries")
	// ErrClosed is returned by a Remote whose Client is closed.
	ErrClosed = errors.New("cluster: client closed")
)

// RemoteError is the failure of one remote execution, reported by the
// worker that ran (or refused) it.
type RemoteError struct {
	Task   string // the registered task name
	Worker string // the worker's name
	Host   string // the worker's host
	Msg    string // the worker's error text
	kind   string
}

// Error names the task and the worker.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("cluster: task %q on worker %s (%s): %s", e.Task, e.Worker, e.Host, e.Msg)
}

// Unwrap returns [ErrMismatch], [ErrMalformed] or [ErrPoison] for those
// failures, nil for a failure of the task itself.
func (e *RemoteError) Unwrap() error {
	switch e.kind {
	case kindMismatch:
		return ErrMismatch
	case kindMalformed:
		return ErrMalformed
	case kindPoison:
		return ErrPoison
	}
	return nil
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func checkName(what, name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("cluster: %s name %q: want 1 to 64 letters, digits, '-' or '_'", what, name)
	}
	return nil
}

// Option configures a [Client] or a [Worker]: where their streams live and
// how they are stored. A client and the workers that serve it must agree on
// Namespace; the first of them to start creates the streams with its
// storage settings.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	ns          string
	storage     jetstream.StorageType
	replicas    int
	log         *slog.Logger
	inlineLimit int
	maxPayload  int64
	objTTL      time.Duration
	workerName  string
	heartbeat   time.Duration
	probe       time.Duration
	chunk       [3]int // region chunk shape (Regions only)
	pullWait    time.Duration
}

// defaultHeartbeat is how often a worker renews its directory entry, which
// lives for five of them.
const defaultHeartbeat = 2 * time.Second

func newConfig(opts []Option) (config, error) {
	c := config{
		ns:          "htgs",
		storage:     jetstream.MemoryStorage,
		replicas:    1,
		log:         slog.New(slog.DiscardHandler),
		inlineLimit: 256 << 10,
		maxPayload:  DefaultMaxPayload,
		objTTL:      time.Hour,
		heartbeat:   defaultHeartbeat,
		probe:       3 * time.Second,
		pullWait:    time.Second,
	}
	for _, o := range opts {
		o.apply(&c)
	}
	if err := checkName("namespace", c.ns); err != nil {
		return c, err
	}
	if c.maxPayload < 1 {
		return c, fmt.Errorf("cluster: MaxPayload %d", c.maxPayload)
	}
	if c.replicas < 1 {
		return c, fmt.Errorf("cluster: %d replicas", c.replicas)
	}
	return c, nil
}

// Namespace separates the streams of independent applications sharing one
// NATS server (default "htgs").
func Namespace(ns string) Option { return option(func(c *config) { c.ns = ns }) }

// FileStorage keeps the work, result and object streams on disk instead of
// in memory, so that they survive a server restart.
func FileStorage() Option { return option(func(c *config) { c.storage = jetstream.FileStorage }) }

// Replicas sets the number of copies of each stream in a JetStream cluster
// (R3 on three servers survives the loss of one). Default 1.
func Replicas(n int) Option { return option(func(c *config) { c.replicas = n }) }

// Logger sets the logger for refused messages and worker events (default:
// discard).
func Logger(l *slog.Logger) Option { return option(func(c *config) { c.log = l }) }

// InlineLimit sets the size above which a payload goes through the object
// store by reference instead of inside the message (default 256 KiB; it
// must stay below the server's maximum payload, 1 MiB by default).
func InlineLimit(bytes int) Option { return option(func(c *config) { c.inlineLimit = bytes }) }

// DefaultMaxPayload is the default of [MaxPayload], 1 GiB (encoding/gob
// refuses larger messages anyway).
const DefaultMaxPayload = 1 << 30

// MaxPayload sets the largest payload, in bytes, that a worker reads as an
// input, a client as a result, or a [Regions] as an object's body from the
// object store (default
// [DefaultMaxPayload]). The object's size is checked before it is read: a
// larger one is refused as [ErrMalformed], so that a peer cannot make a
// process load an object of any size. Inline payloads are bounded by the
// server's maximum message size.
func MaxPayload(bytes int64) Option { return option(func(c *config) { c.maxPayload = bytes }) }

// WorkerName sets a worker's name, reported with its results (default: the
// host name and process id). Clients ignore it.
func WorkerName(name string) Option { return option(func(c *config) { c.workerName = name }) }

// PullWait sets how long a worker copy's pull request waits for an input
// before the copy asks again (default 1 s). It bounds two waits: a stall
// when the server leaves a pull request unanswered although an input is
// pending (see docs/cluster.md), and how long Serve takes to stop, since it
// lets its last pulls expire rather than cancel them. Clients ignore it.
func PullWait(d time.Duration) Option {
	return option(func(c *config) { c.pullWait = max(d, 10*time.Millisecond) })
}

// names of the streams, subjects and buckets of one namespace.
type names struct{ ns string }

func (n names) workStream() string          { return strings.ToUpper(n.ns) + "_WORK" }
func (n names) resultStream() string        { return strings.ToUpper(n.ns) + "_RESULTS" }
func (n names) objBucket() string           { return strings.ToUpper(n.ns) + "_OBJECTS" }
func (n names) dirBucket() string           { return strings.ToUpper(n.ns) + "_WORKERS" }
func (n names) work(task string) string     { return n.ns + ".work." + task }
func (n names) result(client string) string { return n.ns + ".res." + client }

// started is the subject of the notices the workers send a client when
// they take one of its inputs: plain NATS, outside the streams.
func (n names) started(client string) string { return n.ns + ".run." + client }

// call is the subject of the direct requests of a task (under the name it
// is served under), outside the streams; its workers subscribe to it in a
// queue group, so that each request goes to one of them. It names the
// direct protocol's version (see directProto): ns.call.d2.TASK.
func (n names) call(task string) string {
	return n.ns + ".call.d" + strconv.Itoa(directProto) + "." + task
}

// direct is a reply subject of a client for direct requests, outside the
// streams: token names one of its reply slots (see replySlot), which
// carries one request at a time; the request's ID travels in hID.
func (n names) direct(client, token string) string { return n.ns + ".dres." + client + "." + token }
func (n names) directPrefix() string               { return n.ns + ".dres." }

// clientOf returns the client id in reply, the reply subject of a work
// message (ns.res.CLIENT) or of a direct request (ns.dres.CLIENT.TOKEN), or
// "" if reply is neither.
func (n names) clientOf(reply string) string {
	if rest, ok := strings.CutPrefix(reply, n.ns+".res."); ok {
		if rest == "" || strings.ContainsAny(rest, ".*> ") {
			return ""
		}
		return rest
	}
	if rest, ok := strings.CutPrefix(reply, n.directPrefix()); ok {
		client, id, ok := strings.Cut(rest, ".")
		if !ok || client == "" || id == "" || strings.ContainsAny(client, "*> ") || strings.ContainsAny(id, ".*> ") {
			return ""
		}
		return client
	}
	return ""
}

// stores is what a client and a worker share: the JetStream context, the
// object store for large payloads and the worker directory.
type stores struct {
	js  jetstream.JetStream
	obj jetstream.ObjectStore
	dir jetstream.KeyValue
	n   names
	cfg config
}

// payload reads the object ref of the object store: an input or a result
// too large for a message. An object larger than the MaxPayload limit is
// refused before any of it is read.
func (s *stores) payload(ctx context.Context, ref string) ([]byte, error) {
	return readObject(ctx, s.obj, ref, s.cfg.maxPayload)
}

// readObject reads the object ref of obj, refusing (ErrMalformed) one
// whose size is over limit before any of it is read, and reading at most
// limit bytes.
func readObject(ctx context.Context, obj jetstream.ObjectStore, ref string, limit int64) ([]byte, error) {
	r, err := obj.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	if info.Size > uint64(limit) {
		return nil, fmt.Errorf("%w: object %s holds %d bytes, over the limit of %d (MaxPayload)", ErrMalformed, ref, info.Size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cluster: object %s: %w", ref, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: object %s holds more than its %d bytes, over the limit of %d (MaxPayload)", ErrMalformed, ref, info.Size, limit)
	}
	return b, nil
}

// setup creates (or finds) the streams and buckets of cfg's namespace.
func setup(ctx context.Context, js jetstream.JetStream, cfg config) (*stores, error) {
	n := names{cfg.ns}
	s := &stores{js: js, n: n, cfg: cfg}
	streams := []jetstream.StreamConfig{{
		Name:        n.workStream(),
		Description: "htgs cluster: task inputs, one consumer per task name",
		Subjects:    []string{n.ns + ".work.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     cfg.storage,
		Replicas:    cfg.replicas,
		Duplicates:  2 * time.Minute,
	}, {
		Name:        n.resultStream(),
		Description: "htgs cluster: task results, one consumer per client",
		Subjects:    []string{n.ns + ".res.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     cfg.storage,
		Replicas:    cfg.replicas,
		Duplicates:  2 * time.Minute,
		MaxAge:      cfg.objTTL,
	}}
	for _, sc := range streams {
		if _, err := js.CreateStream(ctx, sc); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("cluster: stream %s: %w", sc.Name, err)
		}
	}
	var err error
	s.obj, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      n.objBucket(),
		Description: "htgs cluster: payloads too large for a message",
		Storage:     cfg.storage,
		Replicas:    cfg.replicas,
		TTL:         cfg.objTTL,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		s.obj, err = js.ObjectStore(ctx, n.objBucket())
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: object store %s: %w", n.objBucket(), err)
	}
	s.dir, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      n.dirBucket(),
		Description: "htgs cluster: live workers and the tasks they serve",
		Storage:     jetstream.MemoryStorage,
		Replicas:    cfg.replicas,
		TTL:         5 * cfg.heartbeat,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		s.dir, err = js.KeyValue(ctx, n.dirBucket())
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: worker directory %s: %w", n.dirBucket(), err)
	}
	return s, nil
}
