package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// readProcs runs its reader processes over the files it is given, and
// fails when one of them is short.
func TestReadProcs(t *testing.T) {
	root := t.TempDir()
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(root, name), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if _, _, err := readProcs(t, root, names, 1000, 2); err != nil {
		t.Fatalf("readProcs over whole files: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "f3"), make([]byte, 999), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readProcs(t, root, names, 1000, 2); err == nil {
		t.Fatal("readProcs over a short file succeeded")
	}
}
