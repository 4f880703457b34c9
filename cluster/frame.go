package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// The direct requests (see [DirectLimit]) and their answers carry no NATS
// headers: what a work message says in headers is a binary prefix of the
// payload instead, a frame, so that neither side writes, parses or
// allocates headers on the path of a small item. A frame starts with
// frameMagic and the version of the direct protocol, directProto; its
// strings are each a uvarint length and the bytes.
//
// A request (client to worker, on the task's call subject, the reply
// subject one of the client's reply slots):
//
//	magic, directProto, task, version, codec, id, payload...
//
// An answer (worker to client, on the request's reply subject):
//
//	magic, directProto, worker, host, kind, count (uvarint), id, ref, error, payload...
//
// kind is one byte (kindByte): a result, a failure of one of the error
// kinds, or busy (not run: the client sends the input through the work
// stream). ref names the object holding a result too large for a message
// (the payload is then empty). The version is also in the call subject
// (names.call), so that a worker and a client of different direct
// protocols never meet there: the client's request finds no one listening
// (a 503 from the server) and goes through the work stream, whose messages
// carry hProto; a worker that takes direct requests says so in its
// directory entry (DirectTask.Proto), which a client reads before it
// sends any. A frame of another version on the subject is refused as
// ErrMismatch, one that does not parse as ErrMalformed.
const (
	frameMagic  = 0xC7
	directProto = 2
)

// kindByte returns the byte of an answer frame's kind: 0 for a result,
// then the error kinds and busy.
func kindByte(kind string) byte {
	switch kind {
	case kindTask:
		return 1
	case kindMismatch:
		return 2
	case kindMalformed:
		return 3
	case kindPoison:
		return 4
	case kindBusy:
		return 5
	}
	return 0
}

// kindOf returns the kind of an answer frame's kind byte, false for a byte
// kindByte never writes.
func kindOf(b byte) (string, bool) {
	switch b {
	case 0:
		return "", true
	case 1:
		return kindTask, true
	case 2:
		return kindMismatch, true
	case 3:
		return kindMalformed, true
	case 4:
		return kindPoison, true
	case 5:
		return kindBusy, true
	}
	return "", false
}

// errTruncAnswer reports an answer frame cut short.
var errTruncAnswer = fmt.Errorf("%w: truncated direct answer frame", ErrMalformed)

// errFrameVersion reports a frame of another direct protocol version.
var errFrameVersion = errors.New("direct protocol version")

// appendStr appends s with its length.
func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readStr reads a string appendStr wrote at the start of b and returns it
// (a slice of b) and the rest.
func readStr(b []byte) (s, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// frameStart checks the magic and the version at the start of b and
// returns the rest.
func frameStart(b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != frameMagic {
		return nil, fmt.Errorf("%w: not a direct request frame", ErrMalformed)
	}
	if b[1] != directProto {
		return nil, fmt.Errorf("%w %d, this side speaks %d", errFrameVersion, b[1], directProto)
	}
	return b[2:], nil
}

// requestHead returns the part of a request frame that every input of a
// task carries: the magic, the version, the task, its version and codec.
func requestHead(task, version, codec string) []byte {
	b := []byte{frameMagic, directProto}
	b = appendStr(b, task)
	b = appendStr(b, version)
	return appendStr(b, codec)
}

// appendRequest appends the request frame of input id (encoded as data)
// to b, which holds its requestHead.
func appendRequest(b []byte, id string, data []byte) []byte {
	b = appendStr(b, id)
	return append(b, data...)
}

// directRequest is a parsed request frame; its fields are slices of the
// frame.
type directRequest struct {
	task, version, codec, id, data []byte
}

// parseRequest parses a request frame. A frame of another version fails
// with errFrameVersion, any other fault with ErrMalformed.
func parseRequest(b []byte) (directRequest, error) {
	var r directRequest
	b, err := frameStart(b)
	if err != nil {
		return r, err
	}
	ok := true
	for _, f := range []*[]byte{&r.task, &r.version, &r.codec, &r.id} {
		if *f, b, ok = readStr(b); !ok {
			return directRequest{}, fmt.Errorf("%w: truncated direct request frame", ErrMalformed)
		}
	}
	r.data = b
	return r, nil
}

// answerHead returns the part of an answer frame that every answer of a
// worker carries: the magic, the version, the worker and its host.
func answerHead(worker, host string) []byte {
	b := []byte{frameMagic, directProto}
	b = appendStr(b, worker)
	return appendStr(b, host)
}

// appendAnswer appends an answer frame's variable part to b, which holds
// the worker's answerHead.
func appendAnswer(b []byte, kind string, count int, id, ref, errMsg string, out []byte) []byte {
	b = append(b, kindByte(kind))
	b = binary.AppendUvarint(b, uint64(max(count, 0)))
	b = appendStr(b, id)
	b = appendStr(b, ref)
	b = appendStr(b, errMsg)
	return append(b, out...)
}

// directAnswer is a parsed answer frame; its byte fields are slices of the
// frame.
type directAnswer struct {
	worker, host, id, ref, err, data []byte
	kind                             string
	count                            int
}

// parseAnswer parses an answer frame.
func parseAnswer(b []byte) (directAnswer, error) {
	var a directAnswer
	b, err := frameStart(b)
	if err != nil {
		return a, err
	}
	ok := true
	trunc := errTruncAnswer
	if a.worker, b, ok = readStr(b); !ok {
		return directAnswer{}, trunc
	}
	if a.host, b, ok = readStr(b); !ok || len(b) < 1 {
		return directAnswer{}, trunc
	}
	if a.kind, ok = kindOf(b[0]); !ok {
		return directAnswer{}, fmt.Errorf("%w: direct answer of kind %d", ErrMalformed, b[0])
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > 1<<31 {
		return directAnswer{}, trunc
	}
	a.count, b = int(n), b[1+k:]
	for _, f := range []*[]byte{&a.id, &a.ref, &a.err} {
		if *f, b, ok = readStr(b); !ok {
			return directAnswer{}, trunc
		}
	}
	a.data = b
	return a, nil
}

// maxPooledFrame bounds the buffers of direct frames that are kept for
// the next request or answer.
const maxPooledFrame = 64 << 10

// frameBuf returns a buffer of pool for a frame (*[]byte), a new one when
// the pool has none.
func frameBuf(pool *sync.Pool) *[]byte {
	bp, _ := pool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	return bp
}

// keepFrameBuf gives bp back to pool once its frame is sent (a NATS
// publish copies it), unless it grew past maxPooledFrame.
func keepFrameBuf(pool *sync.Pool, bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		pool.Put(bp)
	}
}
