package funclen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOver(t *testing.T) {
	dir := t.TempDir()
	long := "package p\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 10) + "}\n\n" +
		"type T[X any] struct{}\n\nfunc (t *T[X]) m() {\n" + strings.Repeat("\t_ = 1\n", 3) + "}\n\nfunc short() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	// A long function in a test file does not count.
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc inTest() {\n"+strings.Repeat("\t_ = 1\n", 20)+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Over(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasSuffix(got[0], "p.go:3: long is 12 lines (at most 5)") {
		t.Fatalf("Over(5) = %q, want only long (12 lines)", got)
	}
	got, err = Over(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[1], "(T).m is 5 lines") {
		t.Fatalf("Over(4) = %q, want long and (T).m (5 lines)", got)
	}
}
