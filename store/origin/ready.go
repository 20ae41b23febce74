package origin

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// canLoad reports whether the process can still do what loading a
// snapshot takes: map a page and open a file. A process out of mappings
// (vm.max_map_count), memory or file descriptors fails every load; its
// /-/ready says so, rather than ready, until it can again.
func canLoad() error {
	b, err := anonMmap(-1, 0, unix.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("cannot map a page: %w", err)
	}
	unix.Munmap(b)
	f, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("cannot open a file: %w", err)
	}
	return f.Close()
}

// anonMmap is unix.Mmap; tests replace it.
var anonMmap = unix.Mmap
