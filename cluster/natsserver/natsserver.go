// Package natsserver runs an embedded NATS server with JetStream in this
// process, for tests, benchmarks and programs that want one without a
// nats-server executable. It is apart from package cluster so that the
// client and worker code does not link the server (about 40 s of the first
// build); programs that only need a server to talk to can run a
// nats-server executable with cluster.StartServerProcess instead.
package natsserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is an embedded NATS server with JetStream enabled, running in this
// process. It listens on the loopback interface only, on a port chosen by
// the system, and accepts only clients that present its token, which is
// generated from crypto/rand at start.
//
// An embedded server is the default for one machine: the manager process
// starts one and its local worker processes connect to it. The same client
// and worker code runs against a real NATS cluster: connect with
// nats.Connect and the cluster's credentials instead.
type Server struct {
	ns      *server.Server
	token   string
	dir     string // the JetStream store directory
	tempDir bool   // dir was made by Start and is removed on Shutdown
}

// Option configures [Start].
type Option interface{ apply(*config) }

type config struct {
	dir         string
	token       string
	port        int
	host        string
	maxWait     time.Duration
	name        string
	clusterName string
	clusterPort int
	routes      []string
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// StoreDir keeps the server's JetStream files (file-backed streams and
// object stores) in dir, which outlives the server: a server started again
// on the same directory finds its streams. Without it the server uses a
// fresh temporary directory, removed by Shutdown.
func StoreDir(dir string) Option {
	return option(func(c *config) { c.dir = dir })
}

// Token sets the token clients must present instead of a generated
// one (for a server restarted on the same StoreDir and port, whose clients
// reconnect with the token they know).
func Token(token string) Option {
	return option(func(c *config) { c.token = token })
}

// Port makes the server listen on a fixed loopback port instead of one
// chosen by the system.
func Port(port int) Option {
	return option(func(c *config) { c.port = port })
}

// Host makes the server listen for clients on host (an address of
// this machine) instead of 127.0.0.1, so that workers on other hosts can
// join; the token still guards it. Use it on a trusted network, or put TLS
// in front: the embedded server speaks plain NATS.
func Host(host string) Option {
	return option(func(c *config) { c.host = host })
}

// Name names the server (default "htgs-embedded"); the servers of a
// cluster need distinct names.
func Name(name string) Option {
	return option(func(c *config) { c.name = name })
}

// Cluster makes the server a member of the JetStream cluster name:
// it listens for routes on 127.0.0.1:port and connects to the other
// members' route URLs (nats://127.0.0.1:PORT). Three such servers on one
// machine give replicated (R3) streams for tests and demonstrations; a
// production cluster is configured and run as NATS documents, not
// embedded.
func Cluster(name string, port int, routes ...string) Option {
	return option(func(c *config) {
		c.clusterName, c.clusterPort, c.routes = name, port, routes
	})
}

// Start starts an embedded NATS server with JetStream on 127.0.0.1
// and waits until it accepts connections.
func Start(opts ...Option) (*Server, error) {
	cfg := config{port: -1, host: "127.0.0.1", maxWait: 10 * time.Second}
	for _, o := range opts {
		o.apply(&cfg)
	}
	s := &Server{dir: cfg.dir, token: cfg.token}
	if s.token == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("natsserver: server token: %w", err)
		}
		s.token = hex.EncodeToString(b[:])
	}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "htgs-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natsserver: server store: %w", err)
		}
		s.dir, s.tempDir = d, true
	}
	if cfg.name == "" {
		cfg.name = "htgs-embedded"
	}
	sopts := &server.Options{
		ServerName:    cfg.name,
		Host:          cfg.host,
		Port:          cfg.port,
		Authorization: s.token,
		JetStream:     true,
		StoreDir:      s.dir,
		NoSigs:        true,
		NoLog:         true,
		MaxPayload:    8 << 20,
	}
	if cfg.clusterName != "" {
		sopts.Cluster = server.ClusterOpts{Name: cfg.clusterName, Host: "127.0.0.1", Port: cfg.clusterPort}
		for _, r := range cfg.routes {
			u, err := url.Parse(r)
			if err != nil {
				s.removeDir()
				return nil, fmt.Errorf("natsserver: server route %q: %w", r, err)
			}
			sopts.Routes = append(sopts.Routes, u)
		}
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("natsserver: server: %w", err)
	}
	s.ns = ns
	ns.Start()
	if !ns.ReadyForConnections(cfg.maxWait) {
		s.Shutdown()
		return nil, errors.New("natsserver: server: not ready for connections")
	}
	return s, nil
}

// URL returns the server's client URL without credentials, such as
// nats://127.0.0.1:4222.
func (s *Server) URL() string { return s.ns.ClientURL() }

// Token returns the token clients must present.
func (s *Server) Token() string { return s.token }

// AuthURL returns the client URL with the token in it
// (nats://TOKEN@127.0.0.1:PORT), the one string a local worker process
// needs to join. It is a secret: hand it to children through the
// environment (see cluster.EnvURL) rather than the command line, which other
// users of the machine can read.
func (s *Server) AuthURL() string {
	u, err := url.Parse(s.URL())
	if err != nil {
		return s.URL()
	}
	u.User = url.User(s.token)
	return u.String()
}

// Connect opens a client connection to the server with its token; opts are
// passed on to nats.Connect.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(s.URL(), append([]nats.Option{nats.Token(s.token), nats.Name("htgs")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect to embedded server: %w", err)
	}
	return nc, nil
}

// ConnectInProcess opens a client connection to the server with its token
// through memory (a pipe between the connection and the server's goroutines)
// instead of a loopback TCP socket: a message from or to this connection
// costs no system call and no network wake-up on its side. The connection
// reaches only this server: if the server stops, it does not fail over to
// another of its cluster. opts are passed on to nats.Connect.
func (s *Server) ConnectInProcess(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(s.URL(), append([]nats.Option{nats.Token(s.token), nats.Name("htgs"), nats.InProcessServer(s.ns)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect in process to embedded server: %w", err)
	}
	return nc, nil
}

// StoreDir returns the directory of the server's JetStream files.
func (s *Server) StoreDir() string { return s.dir }

// Shutdown stops the server, waits until all its goroutines have returned,
// and removes its store directory if Start made it.
func (s *Server) Shutdown() {
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	}
	s.removeDir()
}

func (s *Server) removeDir() {
	if s.tempDir {
		os.RemoveAll(s.dir)
		s.tempDir = false
	}
}
