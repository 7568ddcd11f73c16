package file

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// TestJSONLinesStrict: lines that encoding/json would rewrite silently
// (invalid UTF-8, repeated keys, null or non-object lines) are malformed,
// named by file and line, and follow the malformed policy; numbers are
// exact.
func TestJSONLinesStrict(t *testing.T) {
	dir := t.TempDir()
	good := `{"id":1,"big":12345678901234567891,"f":1.0,"neg":-9007199254740993}`
	for _, c := range []struct {
		name, line string
		want       error
	}{
		{"invalid-utf8-value", "{\"id\":2,\"s\":\"x\xffy\"}", jsonrecord.ErrInvalidUTF8},
		{"invalid-utf8-key", "{\"id\":2,\"\xc3\":1}", jsonrecord.ErrInvalidUTF8},
		{"lone-surrogate", `{"id":2,"s":"\udc00"}`, jsonrecord.ErrInvalidUTF8},
		{"duplicate-key", `{"id":2,"id":3}`, jsonrecord.ErrDuplicateKey},
		{"duplicate-nested-key", `{"id":2,"a":[{"k":1,"k":2}]}`, jsonrecord.ErrDuplicateKey},
		{"null", `null`, jsonrecord.ErrNotObject},
		{"array", `[{"id":2}]`, jsonrecord.ErrNotObject},
		{"number", `2`, jsonrecord.ErrNotObject},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name+".jsonl")
			if err := os.WriteFile(p, []byte(good+"\n"+c.line+"\n\n{\"id\":4}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := readSplit(t, JSONLines[map[string]any](), Split{Path: p, End: -1}, -1)
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrMalformed) || !errors.Is(err, c.want) {
				t.Fatalf("got %v, want a *RecordError wrapping ErrMalformed and %v", err, c.want)
			}
			if wantOff := int64(len(good) + 1); re.File != p || re.Offset != wantOff {
				t.Errorf("error names %s at %d, want %s at %d", re.File, re.Offset, p, wantOff)
			}
			if msg := err.Error(); !strings.Contains(msg, p) || !strings.Contains(msg, "line 2:") {
				t.Errorf("message %q does not name the file and line 2", msg)
			}

			got, _, err := readSplit(t, JSONLines[map[string]any](), Split{Path: p, End: -1}, -1, OnMalformed(SkipMalformed))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0]["id"] != int64(1) || got[1]["id"] != int64(4) {
				t.Fatalf("skip: got %v, want the records with id 1 and 4", got)
			}
			b, err := json.Marshal(got[0])
			if want := `{"big":12345678901234567891,"f":1.0,"id":1,"neg":-9007199254740993}`; err != nil || string(b) != want {
				t.Errorf("numbers re-encoded as %s (%v), want %s", b, err, want)
			}
		})
	}
	t.Run("line-numbers-count-blank-lines", func(t *testing.T) {
		p := filepath.Join(dir, "blank.jsonl")
		if err := os.WriteFile(p, []byte("\n\r\n{}\n  \nnull\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := readSplit(t, JSONLines[map[string]any](), Split{Path: p, End: -1}, -1)
		if err == nil || !strings.Contains(err.Error(), "line 5:") {
			t.Fatalf("got %v, want an error naming line 5", err)
		}
	})
	t.Run("resumed-inside-the-file", func(t *testing.T) {
		p := filepath.Join(dir, "resumed.jsonl")
		if err := os.WriteFile(p, []byte(good+"\nnull\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := readSplit(t, JSONLines[map[string]any](), Split{Path: p, Offset: int64(len(good) + 1), End: -1}, -1)
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, jsonrecord.ErrNotObject) || re.Offset != int64(len(good)+1) {
			t.Fatalf("got %v, want a *RecordError at offset %d wrapping ErrNotObject", err, len(good)+1)
		}
	})
}
