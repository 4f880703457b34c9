package tracefmt

import (
	"encoding/json"
	"testing"
	"time"
)

// The fields carry the format's names, and empty optional ones are left
// out.
func TestEventJSON(t *testing.T) {
	b, err := json.Marshal(Event{Name: "gemm", Ph: "X", Ts: Micros(1500 * time.Nanosecond), Dur: 2, Pid: 1, Tid: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"name":"gemm","ph":"X","ts":1.5,"dur":2,"pid":1,"tid":3}`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
}
