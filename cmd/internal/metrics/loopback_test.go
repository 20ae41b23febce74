package metrics

import (
	"net"
	"testing"
)

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9464}, true},
		{&net.TCPAddr{IP: net.IPv4(127, 3, 2, 1), Port: 9464}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9464}, true},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9464}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9464}, false},
		{&net.TCPAddr{Port: 9464}, false}, // ":9464": every interface
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 9464}, false},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 9464}, false},
		{&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9464}, true},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 9464}, true},
		{&net.UDPAddr{IP: net.IPv4(192, 168, 1, 2), Port: 9464}, false},
		{&net.UnixAddr{Name: "/run/pinfs.sock", Net: "unix"}, false},
	} {
		if got := Loopback(tc.addr); got != tc.want {
			t.Errorf("Loopback(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestLoopbackOfServedAddress decides on what Serve actually bound: a
// host name is resolved, an empty host listens everywhere.
func TestLoopbackOfServedAddress(t *testing.T) {
	m := New(&fakeSource{})
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true,
		"localhost:0": true,
		":0":          false,
		"0.0.0.0:0":   false,
	} {
		got, err := m.Serve(t.Context(), addr)
		if err != nil {
			t.Fatalf("Serve(%q): %v", addr, err)
		}
		if Loopback(got) != want {
			t.Errorf("Serve(%q) bound %s: Loopback = %v, want %v", addr, got, !want, want)
		}
	}
}
