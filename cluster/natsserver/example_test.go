package natsserver_test

import (
	"fmt"
	"strings"

	"github.com/gohtgs/htgs/cluster/natsserver"
)

// The embedded server listens on loopback only and refuses clients without
// its token.
func ExampleStart() {
	srv, err := natsserver.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	fmt.Println(strings.HasPrefix(srv.URL(), "nats://127.0.0.1:"), len(srv.Token()) > 0)
	conn, err := srv.Connect() // with the token
	if err != nil {
		panic(err)
	}
	conn.Close()
	// Output: true true
}
