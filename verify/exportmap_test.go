package verify

// SetMmap replaces the function that maps index files (nil: the real one)
// and returns a function that restores it.
func SetMmap(f func(fd int, off int64, n int, prot, flags int) ([]byte, error)) (restore func()) {
	old := mmap
	if f != nil {
		mmap = f
	}
	return func() { mmap = old }
}

// RealMmap is the function that maps index files.
var RealMmap = mmap
