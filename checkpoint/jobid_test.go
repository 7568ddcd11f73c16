package checkpoint

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestValidJobID: validJobID accepts exactly what the pattern
// ^[0-9A-Za-z._-]{1,128}$ (its former definition) matches.
func TestValidJobID(t *testing.T) {
	pattern := regexp.MustCompile(`^[0-9A-Za-z._-]{1,128}$`)
	ids := []string{
		"", "a", "0123456789abcdef", "job-1.2_3", "A.Z-a_z",
		strings.Repeat("x", 127), strings.Repeat("x", 128), strings.Repeat("x", 129),
		"a b", "a/b", "a\nb", "a\x00", "é", "ab\xff", "../x", "x:y", "+", "~",
	}
	// Random strings over the valid characters and their neighbours in
	// ASCII, of lengths around both bounds.
	const alphabet = "09AZaz._-/:@[`{ \n\x00\x7f\x80"
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := r.IntN(132)
		b := make([]byte, n)
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[i] = "0123456789abcdefABCDEF._-"[r.IntN(25)]
			}
		}
		ids = append(ids, string(b))
	}
	valid := 0
	for _, id := range ids {
		got, want := validJobID(id), pattern.MatchString(id)
		if got != want {
			t.Errorf("validJobID(%q) = %v, want %v", id, got, want)
		}
		if got {
			valid++
		}
	}
	if valid == 0 || valid == len(ids) {
		t.Fatalf("%d of %d ids valid: the table does not test both outcomes", valid, len(ids))
	}
}
