package device_test

import (
	"fmt"
	"testing"

	"github.com/gohtgs/htgs/device"
)

// The devices of this package print as their names.
func TestDevicesAreStringers(t *testing.T) {
	var _ fmt.Stringer = device.Host{}
	if s := fmt.Sprint(device.Host{Index: 2, Bytes: 1 << 30}); s != "cpu2" {
		t.Errorf("Host prints as %q, want cpu2", s)
	}
	for i, d := range device.Hosts(3) {
		if s := fmt.Sprint(d); s != fmt.Sprintf("cpu%d", i) {
			t.Errorf("Hosts(3)[%d] prints as %q", i, s)
		}
	}
}
