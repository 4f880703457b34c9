package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A request and an answer frame read back as written, with strings long
// enough for a length of two bytes, empty ones and any payload; each of
// their strings cut short fails as ErrMalformed.
func TestFrameRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, payload := range [][]byte{nil, {0}, []byte("payload \xff bytes")} {
		head := requestHead("square", long, "gob")
		b := appendRequest(head, "c1-2", payload)
		r, err := parseRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.task) != "square" || string(r.version) != long || string(r.codec) != "gob" || string(r.id) != "c1-2" || !bytes.Equal(r.data, payload) {
			t.Errorf("request read back as %q %q %q %q %q", r.task, r.version, r.codec, r.id, r.data)
		}
		for k := range len(b) - len(payload) {
			if _, err := parseRequest(b[:k]); !errors.Is(err, ErrMalformed) {
				t.Errorf("request cut at %d of %d: %v, want ErrMalformed", k, len(b), err)
			}
		}

		for _, kind := range []string{"", kindTask, kindMismatch, kindMalformed, kindPoison, kindBusy} {
			b := appendAnswer(answerHead("w1", long), kind, 1000, "c1-2", "ref", "it failed", payload)
			a, err := parseAnswer(b)
			if err != nil {
				t.Fatal(err)
			}
			if string(a.worker) != "w1" || string(a.host) != long || a.kind != kind || a.count != 1000 || string(a.id) != "c1-2" ||
				string(a.ref) != "ref" || string(a.err) != "it failed" || !bytes.Equal(a.data, payload) {
				t.Errorf("answer read back as %q %q %q %d %q %q %q %q", a.worker, a.host, a.kind, a.count, a.id, a.ref, a.err, a.data)
			}
			for k := range len(b) - len(payload) {
				if _, err := parseAnswer(b[:k]); !errors.Is(err, ErrMalformed) {
					t.Errorf("answer cut at %d of %d: %v, want ErrMalformed", k, len(b), err)
				}
			}
		}
	}
	b := appendAnswer(answerHead("w", "h"), "", 0, "i", "", "", nil)
	b[len(answerHead("w", "h"))] = 99 // a kind no one writes
	if _, err := parseAnswer(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("answer of kind 99: %v, want ErrMalformed", err)
	}
}

// A frame of another direct protocol version is told apart from a
// malformed one.
func TestFrameVersion(t *testing.T) {
	b := appendRequest(requestHead("square", "v1", "gob"), "id", nil)
	b[1] = directProto + 1
	if _, err := parseRequest(b); !errors.Is(err, errFrameVersion) || errors.Is(err, ErrMalformed) {
		t.Errorf("request of version %d: %v, want errFrameVersion", b[1], err)
	}
	a := appendAnswer(answerHead("w", "h"), "", 0, "id", "", "", nil)
	a[1] = directProto - 1
	if _, err := parseAnswer(a); !errors.Is(err, errFrameVersion) {
		t.Errorf("answer of version %d: %v, want errFrameVersion", a[1], err)
	}
	if _, err := parseRequest([]byte("hello")); !errors.Is(err, ErrMalformed) {
		t.Errorf("a payload that is no frame: %v, want ErrMalformed", err)
	}
}

// FuzzParseFrames: no byte string makes the frame parsers panic, and what
// parses writes back to the same bytes.
func FuzzParseFrames(f *testing.F) {
	f.Add(appendRequest(requestHead("square", "v1", "gob"), "c-1", []byte{1, 2}))
	f.Add(appendAnswer(answerHead("w", "h"), kindTask, 3, "c-1", "", "boom", []byte{4}))
	f.Add([]byte{frameMagic, directProto, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := parseRequest(b); err == nil {
			again := appendRequest(requestHead(string(r.task), string(r.version), string(r.codec)), string(r.id), r.data)
			if !bytes.Equal(again, b) && canonical(b) {
				t.Errorf("request %x writes back as %x", b, again)
			}
		}
		if a, err := parseAnswer(b); err == nil {
			again := appendAnswer(answerHead(string(a.worker), string(a.host)), a.kind, a.count, string(a.id), string(a.ref), string(a.err), a.data)
			if !bytes.Equal(again, b) && canonical(b) {
				t.Errorf("answer %x writes back as %x", b, again)
			}
		}
	})
}

// canonical reports whether b's varints may all be minimal: a frame with a
// padded varint (0x80 0x00 for 0) parses but writes back shorter.
func canonical(b []byte) bool {
	for i := 1; i < len(b); i++ {
		if b[i] == 0 && b[i-1]&0x80 != 0 {
			return false
		}
	}
	return true
}

// A worker refuses a direct request of another task version or codec with
// an answer the client reads as ErrMismatch, and one whose task is not the
// subject's as ErrMalformed; a frame of another protocol version is
// refused (counted and logged) without an answer, since its sender would
// not read it.
func TestDirectFrameRefused(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	c := newClient(t, nc)
	w := serveInProcess(t, connect(t, s), "w", func(w *Worker) error { return register(w, 1, time.Second) })
	waitDirect(t, c, "square")
	inbox := c.st.n.direct(c.id, "test")
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	ask := func(frame []byte, wait time.Duration) (directAnswer, error) {
		t.Helper()
		if err := nc.PublishRequest(c.st.n.call("square"), inbox, frame); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(wait)
		if err != nil {
			return directAnswer{}, err
		}
		return parseAnswer(m.Data)
	}
	for _, tc := range []struct {
		task, version, codec string
		kind, says           string
	}{
		{"square", "v2", "gob", kindMismatch, `version "v2"`},
		{"square", "v1", "json", kindMismatch, `codec "json"`},
		{"multi", "v1", "gob", kindMalformed, `task "multi"`},
	} {
		a, err := ask(appendRequest(requestHead(tc.task, tc.version, tc.codec), "id-"+tc.kind, []byte{1}), 5*time.Second)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		res := c.directResult(&a)
		rerr := (&RemoteError{Task: "square", Worker: res.worker, Host: res.host, Msg: res.errMsg, kind: res.kind}).Unwrap()
		want := map[string]error{kindMismatch: ErrMismatch, kindMalformed: ErrMalformed}[tc.kind]
		if a.kind != tc.kind || string(a.worker) != "w" || !errors.Is(rerr, want) || !strings.Contains(res.errMsg, tc.says) {
			t.Errorf("%+v answered %q by %q: %q", tc, a.kind, a.worker, a.err)
		}
	}
	before := w.Stats().Refused
	b := appendRequest(requestHead("square", "v1", "gob"), "id-v3", []byte{1})
	b[1] = directProto + 1
	if _, err := ask(b, time.Second); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("a frame of version %d: %v, want no answer", b[1], err)
	}
	if n := w.Stats().Refused - before; n != 1 {
		t.Errorf("a frame of version %d: %d refused, want 1", b[1], n)
	}
}

// A client sends direct requests only to the workers that list the direct
// protocol of its version in the directory: an older worker's entry (no
// Proto) counts no copies.
func TestDirectProtoInDirectory(t *testing.T) {
	s := startServer(t)
	c := newClient(t, connect(t, s))
	ctx := context.Background()
	put := func(name string, proto int) {
		e, _ := json.Marshal(WorkerInfo{Name: name, Tasks: map[string]string{"old": "v1", "new": "v1"},
			Direct: map[string]DirectTask{name: {Copies: 3, AckWait: time.Second, Proto: proto}}})
		if _, err := c.st.dir.Put(ctx, name, e); err != nil {
			t.Fatal(err)
		}
	}
	put("old", 0)
	put("new", directProto)
	waitFor(t, "the directory read again", func() bool { return c.directFor("new").copies == 3 })
	if n := c.directFor("old").copies; n != 0 {
		t.Errorf("a worker of no direct protocol version counts %d copies", n)
	}
}
