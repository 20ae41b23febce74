package blocks

import "github.com/pinfs/pinfs/store/pool"

// Pool returns the pool that holds the Reader's blocks (Config.Pool), for
// its metrics and status.
func (r *Reader) Pool() *pool.Pool { return r.cfg.Pool }
