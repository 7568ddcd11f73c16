package engine

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/funclen"
)

// TestFunctionLength keeps the engine readable: no function of the
// package (tests aside) is over 80 lines. Split a longer one into steps
// with names.
func TestFunctionLength(t *testing.T) {
	long, err := funclen.Over(".", 80)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) > 0 {
		t.Errorf("functions over 80 lines:\n%s", strings.Join(long, "\n"))
	}
}
