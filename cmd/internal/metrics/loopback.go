package metrics

import (
	"net"
	"net/netip"
)

// Loopback reports whether addr, an address Serve bound, can be reached
// only from this host: a loopback IP (127.0.0.0/8, ::1). An unspecified
// address (":9464", "0.0.0.0", "::") listens on every interface, and any
// other address can be reached from the network: pprof there shows the
// process's memory and command line to whoever connects, so a mount warns
// about it.
func Loopback(addr net.Addr) bool {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
