package file

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// fuzzSeeds are inputs of every format: good and bad records, blank
// lines, CR LF, quotes, invalid UTF-8, a missing last newline.
var fuzzSeeds = []string{
	"",
	"\n",
	"a\nb\r\nc",
	"{\"id\":1}\n{\"id\":2}\n",
	"{\"id\":1}\n\n  \nnot json\n{\"id\":3}",
	"{\"a\":1,\"a\":2}\n{\"s\":\"\xff\"}\nnull\n[1]\n{\"n\":12345678901234567891}\n",
	"{\"a\":{\"b\":[1,2,{\"c\":\"\\ud800\"}]}}\r\n",
	"a,b,c\n1,\"2\n3\",4\n",
	"\"unterminated,x\n5,6\n",
	"a,\"b\"c\",d\n\"\"\n,,\n",
	"x\r",
	"\r\n\r\n",
}

// checkFormat reads data with f until io.EOF: every error must be
// malformed (wrapping ErrMalformed) with reading going on, offsets must
// grow after every record or error and stay within data, and the number
// of calls is bounded (no hang).
func checkFormat[T any](t *testing.T, f Format[T], data []byte) []T {
	t.Helper()
	rr, err := f.NewReader(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	last := int64(0)
	for range len(data) + 2 {
		v, next, err := rr.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("at offset %d: error %v does not wrap ErrMalformed", last, err)
		}
		if next <= last || next > int64(len(data)) {
			t.Fatalf("offset went from %d to %d (input of %d bytes; err %v)", last, next, len(data), err)
		}
		last = next
		if err == nil {
			out = append(out, v)
		}
	}
	t.Fatalf("more than %d reads of %d bytes: no end", len(data)+2, len(data))
	return nil
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
}

// FuzzTextLines: any bytes are lines; the batch reader the source uses
// returns the same lines as Read, whatever the batch size.
func FuzzTextLines(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := checkFormat(t, TextLines(), data)
		for _, max := range []int{1, 3, 1000} {
			rr, err := TextLines().NewReader(bytes.NewReader(data), 0)
			if err != nil {
				t.Fatal(err)
			}
			br := rr.(batchReader[string])
			var got []string
			for range len(data) + 2 {
				n := len(got)
				var err error
				got, _, err = br.readBatch(got, max, -1, nil)
				if errors.Is(err, io.EOF) || (err == nil && len(got) == n) {
					break
				}
				if err != nil {
					t.Fatalf("readBatch: %v", err)
				}
			}
			if !slices.Equal(got, lines) {
				t.Fatalf("readBatch(max %d) = %q, Read = %q", max, got, lines)
			}
		}
	})
}

// FuzzCSV: any bytes decode to records or malformed errors, with and
// without a header and with another delimiter.
func FuzzCSV(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFormat(t, CSV(), data)
		checkFormat(t, CSV(CSVHeader()), data)
		checkFormat(t, CSV(CSVComma(';')), data)
	})
}

// FuzzJSONLines: any bytes decode to objects (a map, a struct) or
// malformed errors.
func FuzzJSONLines(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFormat(t, JSONLines[map[string]any](), data)
		type doc struct {
			ID int    `json:"id"`
			S  string `json:"s"`
		}
		checkFormat(t, JSONLines[doc](), data)
	})
}
