module github.com/pinfs/pinfs/bench/blake3cmp

go 1.26

require (
	github.com/zeebo/blake3 v0.2.4
	lukechampine.com/blake3 v1.4.1
)

require github.com/klauspost/cpuid/v2 v2.0.12 // indirect
