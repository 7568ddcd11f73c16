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
			if re.Line != 2 || !strings.Contains(err.Error(), p+" line 2 (offset ") {
				t.Errorf("error %q names line %d, want %s line 2", err, re.Line, p)
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
	t.Run("line-numbers", func(t *testing.T) {
		// Blank lines count; so do lines before the split's start
		// (a block split, or a split resumed after a restore), and in
		// compressed files.
		content := "\n\r\n{}\n  \n" + good + "\n\n\n{\"a\":1,\"a\":1}"
		badAt := int64(strings.LastIndex(content, "\n") + 1)
		for _, c := range []struct {
			name string
			data []byte
			sp   Split
		}{
			{"from the start", []byte(content), Split{End: -1}},
			{"resumed", []byte(content), Split{Offset: int64(len("\n\r\n{}\n  \n")), End: -1}},
			{"block", []byte(content), Split{Start: 12, Offset: 12, End: -1}},
			{"terminated", []byte(content + "\n"), Split{Offset: badAt, End: -1}},
			{"gzip", compress(t, "gz", []byte(content)), Split{End: -1}},
			{"zstd resumed", compress(t, "zst", []byte(content)), Split{Offset: badAt - 1, End: -1}},
		} {
			p := filepath.Join(dir, "lines-"+strings.ReplaceAll(c.name, " ", "-")+".jsonl")
			switch {
			case strings.HasPrefix(c.name, "gzip"):
				p += ".gz"
			case strings.HasPrefix(c.name, "zstd"):
				p += ".zst"
			}
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			c.sp.Path = p
			_, _, err := readSplit(t, JSONLines[map[string]any](), c.sp, -1)
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, jsonrecord.ErrDuplicateKey) || re.Line != 8 {
				t.Errorf("%s: got %v, want a *RecordError for line 8 wrapping ErrDuplicateKey", c.name, err)
			}
		}
	})
}
