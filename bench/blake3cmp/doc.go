// Package blake3cmp holds the benchmark behind pinfs's choice of BLAKE3
// library (see README.md). It is a separate module so that the pinfs
// module does not depend on the library that was not chosen.
package blake3cmp
