package natsconn

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// Messages never show the token in a URL.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                                 "nats://127.0.0.1:4222",
		"nats://s3cret@127.0.0.1:4222":                          "nats://127.0.0.1:4222",
		"nats://u:p@a:1,nats://b:2":                             "nats://a:1,nats://b:2",
		"nats://127.0.0.1:4222, nats://tok@127.0.0.1:4223":      "nats://127.0.0.1:4222,nats://127.0.0.1:4223",
		"nats://127.0.0.1:4222,tls://user:pw@host.example:4443": "nats://127.0.0.1:4222,tls://host.example:4443",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if HasUser(in) != (in != want) {
			t.Errorf("HasUser(%q) = %v", in, HasUser(in))
		}
	}
	if got := Redact("nats://%zz@h:1"); strings.Contains(got, "zz") {
		t.Errorf("Redact of an unparsable URL = %q", got)
	}
}

// The token comes from the environment unless the URL has one; a refused
// or missing token says which, wraps nats.ErrAuthorization and shows no
// token.
func TestConnect(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv, err := natsserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	withToken := func(tok string) string { return strings.Replace(srv.URL(), "//", "//"+tok+"@", 1) }

	t.Setenv(EnvToken, srv.Token())
	nc, err := Connect(srv.URL())
	if err != nil {
		t.Fatalf("token from the environment: %v", err)
	}
	nc.Close()
	t.Setenv(EnvToken, "wrong-env")
	if nc, err = Connect(withToken(srv.Token())); err != nil {
		t.Fatalf("token in the URL, a wrong one in the environment: %v", err)
	}
	nc.Close()

	for _, tc := range []struct{ env, url, want string }{
		{"", srv.URL(), "no token given"},
		{"wrong-env", srv.URL(), "refused the token in $" + EnvToken},
		{"", withToken("wrong-url"), "refused the token in the URL"},
	} {
		t.Setenv(EnvToken, tc.env)
		_, err := Connect(tc.url, nats.MaxReconnects(0))
		if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %q, url %q: err = %v, want nats.ErrAuthorization saying %q", tc.env, Redact(tc.url), err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "wrong-") || strings.Contains(err.Error(), srv.Token())) {
			t.Errorf("the error shows a token: %v", err)
		}
	}
}
