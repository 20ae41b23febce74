package localstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pinfs/pinfs/store"
)

// lockPrefix starts the name of the lock file of a swapped key, kept in the
// key's directory beside it (like the ".tmp-" files of writeFile, it is not
// a key: List skips both).
const lockPrefix = ".lock-"

// lockPoll bounds the pause between two tries to take a busy lock, so that
// a waiting Swap notices a canceled context.
const lockPoll = 5 * time.Millisecond

var _ store.Swapper = (*Store)(nil)

// Load returns the bytes at key and their revision: the hex SHA-256 of
// the bytes. Swap replaces a file by renaming a complete one over it, so
// Load sees either the old or the new bytes, never a mix.
func (s *Store) Load(ctx context.Context, key string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, "", err
	}
	data, err := store.ReadRegular(p, store.MaxBlob(key))
	if err != nil {
		return nil, "", fmt.Errorf("localstore: load %s: %w", key, mapErr(err))
	}
	return data, revision(data), nil
}

// Swap writes data at key only if the bytes there still have revision rev
// (rev "": only if key does not exist). A lost race fails with an error
// wrapping store.ErrConflict and leaves the key alone.
//
// Swap holds an exclusive flock(2) on the lock file ".lock-<name>" in the
// key's directory while it compares and writes, so Swaps of one key are
// serialized across goroutines and processes alike (the lock is released
// when its holder exits, however it ends). The new bytes go to a temporary
// file that is fsynced and renamed over the key; the directory is fsynced.
// A key that is a symbolic link is refused, never followed. Writers that
// bypass Swap (Put, Create) do not take the lock: keys that are swapped
// must be written with Swap only.
func (s *Store) Swap(ctx context.Context, key string, data []byte, rev string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("localstore: swap %s: %w", key, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(p), lockPrefix+filepath.Base(p)))
	if err != nil {
		return fmt.Errorf("localstore: swap %s: %w", key, err)
	}
	defer unlock()

	cur, err := store.ReadRegular(p, store.MaxBlob(key))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if rev != "" {
			return fmt.Errorf("localstore: swap %s: the key is gone (expected revision %s): %w", key, rev, store.ErrConflict)
		}
	case err != nil:
		return fmt.Errorf("localstore: swap %s: %w", key, err)
	case rev == "":
		return fmt.Errorf("localstore: swap %s: the key exists already: %w", key, store.ErrConflict)
	case revision(cur) != rev:
		return fmt.Errorf("localstore: swap %s: revision %s, not the %s read: %w", key, revision(cur), rev, store.ErrConflict)
	}
	err = writeFile(p, true, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("localstore: swap %s: %w", key, err)
	}
	return nil
}

// revision is the revision of a swapped key's bytes.
func revision(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// lockFile takes an exclusive flock on the file at p (created if need be,
// never through a symbolic link) and returns the function that releases
// it. It waits for a busy lock until ctx is done.
func lockFile(ctx context.Context, p string) (unlock func(), err error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for pause := 50 * time.Microsecond; ; pause = min(2*pause, lockPoll) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the last descriptor releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, ctx.Err())
		case <-time.After(pause):
		}
	}
}
