package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// EnvURL is the environment variable through which a server's AuthURL is
// handed to local worker processes.
const EnvURL = "HTGS_NATS_URL"

// NATSServerModule and NATSServerVersion name the nats-server release this
// module is built and tested with (the one go.mod requires), for messages
// telling how to install the executable that [StartServerProcess] runs:
// go install NATSServerModule@NATSServerVersion.
const (
	NATSServerModule  = "github.com/nats-io/nats-server/v2"
	NATSServerVersion = "v2.15.3"
)

// FindServerExecutable returns the path of the nats-server executable
// named by name: a path (containing a separator) is checked as it is, a
// bare name is looked up in $PATH. The error says what is missing and how
// to install it.
func FindServerExecutable(name string) (string, error) {
	if name == "" {
		name = "nats-server"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("no nats-server executable (%w); install one with `go install %s@%s` (it goes to $(go env GOPATH)/bin)", err, NATSServerModule, NATSServerVersion)
	}
	return path, nil
}

// ServerProcess is a NATS server with JetStream running as a child process
// of this one, from a nats-server executable: the same server as package
// natsserver embeds, without linking it. It listens on 127.0.0.1 only, on a
// port chosen by the system, and accepts only clients that present its
// token, generated from crypto/rand at start. Its configuration (with the
// token), store and log are in a temporary directory only this user can
// read, removed by Shutdown; the token is not on its command line.
type ServerProcess struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd.Wait has returned
	err   error         // cmd.Wait's error, set before done closes
	dir   string
	url   string
	token string
}

// serverProcessStart bounds the wait for the server's ports file.
const serverProcessStart = 30 * time.Second

// StartServerProcess runs the nats-server executable at path with
// JetStream, on 127.0.0.1 and a port chosen by the system, a maximum
// payload of 8 MiB and a fresh token, and waits until it accepts
// connections. ctx bounds the start only (30 s at most); the server runs
// until Shutdown. On Linux the server gets SIGTERM if this process dies
// without stopping it.
func StartServerProcess(ctx context.Context, path string) (*ServerProcess, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("cluster: server token: %w", err)
	}
	dir, err := os.MkdirTemp("", "htgs-nats-*")
	if err != nil {
		return nil, fmt.Errorf("cluster: server directory: %w", err)
	}
	s := &ServerProcess{dir: dir, token: hex.EncodeToString(b[:]), done: make(chan struct{})}
	q := strconv.Quote
	conf := strings.Join([]string{
		`server_name: "htgs-process"`,
		`host: "127.0.0.1"`,
		`port: -1`,
		`max_payload: 8388608`,
		`authorization { token: ` + q(s.token) + ` }`,
		`jetstream { store_dir: ` + q(filepath.Join(dir, "store")) + ` }`,
		`ports_file_dir: ` + q(dir),
		``}, "\n")
	confPath := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("cluster: server configuration: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "nats-server.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("cluster: server log: %w", err)
	}
	s.cmd = exec.Command(path, "-c", confPath)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = workerProcAttr()
	err = s.cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("cluster: start %s: %w", path, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("cluster: server %s: %w", path, err)
	}
	return s, nil
}

// waitReady waits for the ports file that names the client URL, then for a
// connection with the token to succeed.
func (s *ServerProcess) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serverProcessStart)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.url == "" {
			s.url = s.readPortsFile()
		}
		if s.url != "" {
			nc, err := nats.Connect(s.url, nats.Token(s.token), nats.Timeout(time.Second))
			if err == nil {
				nc.Close()
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before accepting connections (%v)%s", s.err, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("not ready for connections: %w%s", context.Cause(ctx), s.logTail())
		case <-tick.C:
		}
	}
}

// readPortsFile returns the first client URL of the server's ports file,
// or "" while there is none.
func (s *ServerProcess) readPortsFile() string {
	names, _ := filepath.Glob(filepath.Join(s.dir, "*.ports"))
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		var ports struct {
			Client []string `json:"nats"`
		}
		if json.Unmarshal(data, &ports) == nil && len(ports.Client) > 0 {
			return ports.Client[0]
		}
	}
	return ""
}

// logTail returns the end of the server's log, for an error message.
func (s *ServerProcess) logTail() string {
	data, err := os.ReadFile(filepath.Join(s.dir, "nats-server.log"))
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return "; its log ends:\n" + strings.TrimSpace(string(data))
}

// URL returns the server's client URL without credentials, such as
// nats://127.0.0.1:4222.
func (s *ServerProcess) URL() string { return s.url }

// Token returns the token clients must present.
func (s *ServerProcess) Token() string { return s.token }

// Pid returns the server's process ID.
func (s *ServerProcess) Pid() int { return s.cmd.Process.Pid }

// AuthURL returns the client URL with the token in it
// (nats://TOKEN@127.0.0.1:PORT), the one string a local worker process
// needs to join. It is a secret: hand it to children through the
// environment (see [EnvURL]) rather than the command line.
func (s *ServerProcess) AuthURL() string {
	u, err := url.Parse(s.url)
	if err != nil {
		return s.url
	}
	u.User = url.User(s.token)
	return u.String()
}

// Connect opens a client connection to the server with its token; opts are
// passed on to nats.Connect.
func (s *ServerProcess) Connect(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(s.url, append([]nats.Option{nats.Token(s.token), nats.Name("htgs")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to the server process: %w", err)
	}
	return nc, nil
}

// StoreDir returns the directory of the server's JetStream files.
func (s *ServerProcess) StoreDir() string { return filepath.Join(s.dir, "store") }

// serverProcessStop bounds the wait for the server to end after SIGTERM,
// after which it is killed.
const serverProcessStop = 10 * time.Second

// Shutdown stops the server (SIGTERM, then SIGKILL after 10 s), waits for
// it to exit, and removes its directory. It returns the server's exit
// error when it ended otherwise than by Shutdown's signal; calling it
// again returns nil.
func (s *ServerProcess) Shutdown() error {
	if s.dir == "" {
		return nil
	}
	defer s.removeDir()
	var err error
	select {
	case <-s.done:
		if s.err != nil {
			err = fmt.Errorf("cluster: server process %d: %w", s.cmd.Process.Pid, s.err)
		}
	default:
		wait := serverProcessStop
		if s.cmd.Process.Signal(syscall.SIGTERM) != nil {
			wait = 0 // no SIGTERM here (Windows): kill it at once
		}
		t := time.NewTimer(wait)
		select {
		case <-s.done:
			t.Stop()
		case <-t.C:
			_ = s.cmd.Process.Kill()
			<-s.done
			if wait > 0 {
				err = fmt.Errorf("cluster: server process %d did not stop within %v of SIGTERM: killed", s.cmd.Process.Pid, wait)
			}
		}
	}
	return err
}

func (s *ServerProcess) removeDir() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}
