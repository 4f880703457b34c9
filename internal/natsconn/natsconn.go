// Package natsconn connects the example programs' clients and workers to a
// NATS server, with the token taken from the URL or, when the URL has
// none, from the environment, and keeps tokens out of every message.
package natsconn

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// EnvToken is the environment variable that carries a NATS token to
// programs, so that it need not appear on a command line.
const EnvToken = "HTGS_NATS_TOKEN"

// HasUser tells whether a NATS URL (or comma-separated list of them)
// carries credentials.
func HasUser(s string) bool {
	for _, part := range strings.Split(s, ",") {
		if u, err := url.Parse(strings.TrimSpace(part)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// Redact returns a NATS URL (or comma-separated list) without its
// credentials, for messages.
func Redact(s string) string {
	parts := strings.Split(s, ",")
	for i, part := range parts {
		u, err := url.Parse(strings.TrimSpace(part))
		switch {
		case err != nil:
			parts[i] = "(unparsable URL)"
		case u.User != nil:
			u.User = nil
			parts[i] = u.String()
		default:
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// Connect connects to the server(s) of raw with opts and, when raw holds
// no credentials and $HTGS_NATS_TOKEN is set, that token. A refused token
// gives an error wrapping nats.ErrAuthorization that says which token was
// refused, or that none was given; no error shows a token.
func Connect(raw string, opts ...nats.Option) (*nats.Conn, error) {
	token, inURL := os.Getenv(EnvToken), HasUser(raw)
	if token != "" && !inURL {
		opts = append(opts, nats.Token(token))
	}
	nc, err := nats.Connect(raw, opts...)
	if err == nil {
		return nc, nil
	}
	if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
		switch {
		case inURL:
			err = fmt.Errorf("%w: the server refused the token in the URL (nats://TOKEN@HOST:PORT; or leave it out and set $%s)", err, EnvToken)
		case token == "":
			err = fmt.Errorf("%w: no token given: set $%s or put it in the URL (nats://TOKEN@HOST:PORT)", err, EnvToken)
		default:
			err = fmt.Errorf("%w: the server refused the token in $%s", err, EnvToken)
		}
	}
	return nil, fmt.Errorf("connect to %s: %w", Redact(raw), err)
}
