package pin

import "fmt"

// Stats counts what one S3 pin, shard or merge reused and read.
type Stats struct {
	Members    int    // members in the pin (or shard)
	Reused     int    // digest, size and outboard taken from a parent or the digest cache
	Read       int    // members read and hashed
	ReadBytes  int64  // member bytes read from the source
	MetaBytes  int64  // bytes of index segments, parent tables and outboards read to decide reuse
	Disagreed  int    // members read whose parent or cache entry (size or digest) differs from the bytes: all of them with --rehash
	CacheError string // the digest cache could not be read or written (the pin still succeeded)
}

// String is the summary line of a pin, for example
// "100000 members: 99000 reused, 1000 read; read 4096000 bytes of members, 81920 bytes of index and outboards".
func (s Stats) String() string {
	return fmt.Sprintf("%d members: %d reused, %d read; read %d bytes of members, %d bytes of index and outboards",
		s.Members, s.Reused, s.Read, s.ReadBytes, s.MetaBytes)
}

// Stats returns the counts of the last S3, Shard or Merge.
func (p *Pinner) Stats() Stats { return p.stats }
