package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pinfs/pinfs/store"
)

// Signer holds an ed25519 private key loaded by LoadSigner. It signs
// approvals (Sign); it never writes the key anywhere.
type Signer struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

// KeyID returns the id of the signer's public key (see KeyID).
func (s *Signer) KeyID() string { return s.id }

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.pub }

// KeyID returns "sha256:<hex>" of the SHA-256 of pub's PKIX DER encoding: the
// name of a key in envelopes, policies and error messages. It is the same for
// the key in PREFIX.pub and the key derived from PREFIX.key.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		// Only a key of the wrong length fails to marshal; name it by its
		// raw bytes so that it still has an id (it verifies nothing).
		der = pub
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Generate makes a new ed25519 key pair and writes PREFIX.key (the private
// key, PKCS#8 PEM "PRIVATE KEY", mode 0600) and PREFIX.pub (the public key,
// PKIX PEM "PUBLIC KEY", mode 0644). Both are created exclusively: if either
// file exists, Generate fails with an error wrapping fs.ErrExist and leaves
// every existing file as it was.
func Generate(prefix string) (pubPath, keyPath string, err error) {
	pubPath, keyPath = prefix+".pub", prefix+".key"
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	pubPEM, err := PublicKeyPEM(pub)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	// The private key first: if PREFIX.key exists nothing is written at all.
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
		os.Remove(keyPath) // ours: created just above, never handed out
		return "", "", err
	}
	return pubPath, keyPath, nil
}

// PublicKeyPEM encodes pub as PKIX PEM ("PUBLIC KEY"), the form of
// PREFIX.pub and of the keys inline in a policy.
func PublicKeyPEM(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// existsError refuses to overwrite a key file; it matches fs.ErrExist.
type existsError string

func (e existsError) Error() string {
	return string(e) + " already exists; pinfs never overwrites a key file"
}

func (e existsError) Is(target error) bool { return target == fs.ErrExist }

// writeNew creates path exclusively with mode perm and writes data, synced.
// On any failure after creating it, it removes the file again.
func writeNew(path string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return existsError(path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// LoadSigner reads a private key written by Generate. It refuses a key file
// that group or others can access in any way (mode & 0077 != 0), as ssh
// does, rather than warning: a signing key anyone on the host can read
// proves nothing about who approved. It also refuses anything that is not
// one PEM "PRIVATE KEY" block holding a PKCS#8 ed25519 key.
//
// The key file is the user's: it is read through a symbolic link (the mode
// checked is that of the file the link leads to), but must be a regular
// file of at most MaxKeyFile bytes (store.OpenUserFile), so that a FIFO
// fails at once.
func LoadSigner(path string) (*Signer, error) {
	f, fi, err := store.OpenUserFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err) // it names path
	}
	defer f.Close()
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s: mode %04o lets group or others access it; run chmod 600 %s", path, perm, path)
	}
	data, err := store.ReadAtMost(f, fi.Size(), MaxKeyFile, path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err) // it names path
	}
	der, err := onePEM(data, "PRIVATE KEY")
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key %s: a %T, pinfs signs with ed25519 keys only", path, k)
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &Signer{priv: priv, pub: pub, id: KeyID(pub)}, nil
}

// MaxKeyFile is the most bytes pinfs reads of a key file (a private key
// for pinfs approve --key, a public key a policy names, of about 120
// bytes each): a larger one is refused before it is read.
const MaxKeyFile = 64 << 10

// LoadPublicKey reads the public key file at path (ParsePublicKey), a file
// of the user's: through a symbolic link, but a regular file of at most
// MaxKeyFile bytes (store.ReadUserFile). Every error names path.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := store.ReadUserFile(path, MaxKeyFile)
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

// ParsePublicKey parses one PEM "PUBLIC KEY" block (PKIX) holding an ed25519
// key, as Generate writes it to PREFIX.pub.
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	der, err := onePEM(pemBytes, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key: a %T, pinfs verifies ed25519 keys only", k)
	}
	return pub, nil
}

// onePEM returns the bytes of the single PEM block of type typ in data;
// anything but white space around it is refused.
func onePEM(data []byte, typ string) ([]byte, error) {
	b, rest := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("no PEM %q block", typ)
	}
	if b.Type != typ {
		return nil, fmt.Errorf("PEM block is %q, want %q", b.Type, typ)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("data after the PEM %q block", typ)
	}
	return b.Bytes, nil
}

// dsseSigner adapts an ed25519 key to dsse.Signer. ed25519 signs the whole
// message (the DSSE pre-authentication encoding); there is nothing to hash.
type dsseSigner struct {
	priv ed25519.PrivateKey
	id   string
}

func (s dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.priv, data), nil
}

func (s dsseSigner) KeyID() (string, error) { return s.id, nil }

// dsseVerifier adapts an ed25519 public key to dsse.Verifier. Its KeyID makes
// dsse skip signatures that name another key id.
type dsseVerifier struct {
	pub ed25519.PublicKey
	id  string
}

func (v dsseVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("ed25519 signature does not verify")
	}
	return nil
}

func (v dsseVerifier) KeyID() (string, error) { return v.id, nil }

func (v dsseVerifier) Public() crypto.PublicKey { return v.pub }
