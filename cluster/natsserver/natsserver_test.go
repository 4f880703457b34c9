package natsserver_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// A connection through memory reaches the same server as one over TCP:
// requests go both ways between them, and the in-process one crosses no
// socket (it has no local address).
func TestConnectInProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	mem, err := srv.ConnectInProcess()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	tcp, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	for _, c := range []struct {
		name      string
		from, to  *nats.Conn
		subj, msg string
	}{{"memory to TCP", mem, tcp, "to.tcp", "ping"}, {"TCP to memory", tcp, mem, "to.mem", "pong"}} {
		sub, err := c.to.Subscribe(c.subj, func(m *nats.Msg) { _ = m.Respond(append([]byte("re: "), m.Data...)) })
		if err != nil {
			t.Fatal(err)
		}
		if err := c.to.Flush(); err != nil {
			t.Fatal(err)
		}
		got, err := c.from.Request(c.subj, []byte(c.msg), 5*time.Second)
		if err != nil || string(got.Data) != "re: "+c.msg {
			t.Fatalf("%s: %v, %v", c.name, got, err)
		}
		_ = sub.Unsubscribe()
	}
	if _, err := mem.GetClientIP(); err == nil {
		t.Error("the in-process connection has a client IP: it went through a socket")
	}
	if _, err := tcp.GetClientIP(); err != nil {
		t.Errorf("the TCP connection: %v", err)
	}
}
