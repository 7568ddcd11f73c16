package cli

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/engine"
)

func lookupIn(vals map[string]string) func(string) (string, bool) {
	return func(n string) (string, bool) { v, ok := vals[n]; return v, ok }
}

// checkRoundTrip encodes b with vals, checks that no value remains in the
// encoding's literal bytes and that decoding gives b back.
func checkRoundTrip(t *testing.T, vals map[string]string, b []byte) {
	t.Helper()
	c := newSecretCodec(vals)
	enc := c.encode(b)
	for n, v := range vals {
		if v == "" {
			continue
		}
		for _, seg := range literalSegments(t, enc) {
			if bytes.Contains(seg, []byte(v)) {
				t.Fatalf("encode(%q) with %s=%q = %q still holds the value", b, n, v, enc)
			}
		}
	}
	dec, err := decodeRefs(enc, lookupIn(vals))
	if err != nil {
		t.Fatalf("decode(encode(%q)) with %q: %v (encoded %q)", b, vals, err, enc)
	}
	if !bytes.Equal(dec, b) || (b == nil) != (dec == nil) {
		t.Fatalf("decode(encode(%q)) = %q with %q (encoded %q)", b, dec, vals, enc)
	}
}

// literalSegments splits an encoding into the runs of input bytes it
// copied as they are: everything but escapes and references. (A value
// may show across a segment and the next, as in "\x10" "0" "ab" for the
// value "0ab", without having been in the input: the input was "\x10ab".)
func literalSegments(t *testing.T, enc []byte) [][]byte {
	var segs [][]byte
	for {
		i := bytes.IndexByte(enc, refEscape)
		if i < 0 {
			return append(segs, enc)
		}
		segs = append(segs, enc[:i])
		if i+1 >= len(enc) {
			t.Fatalf("encoding ends in an escape: %q", enc)
		}
		if enc[i+1] == refLiteral {
			enc = enc[i+2:]
			continue
		}
		end := bytes.IndexByte(enc[i+2:], refEscape)
		if end < 0 {
			t.Fatalf("unterminated reference in %q", enc)
		}
		enc = enc[i+2+end+1:]
	}
}

func TestSecretRefsRoundTrip(t *testing.T) {
	vals := map[string]string{"A": "secret", "B": "sec", "C": "ret-s", "D": "\x10x", "E": "z", "F": `q"\x`, "G": "secret"}
	for _, in := range []string{
		"", "secret", "xsecretx", "secretsecret", "secret-s", "sec", "\x10", "\x10\x10s", "\x10sA\x10",
		"\x10x", "zz", `{"p":"q\"\\x"}`, "q\"\\x", "ret-sec", "secre",
	} {
		checkRoundTrip(t, vals, []byte(in))
	}
	checkRoundTrip(t, vals, nil)
	if got := newSecretCodec(vals).encode([]byte{}); got == nil {
		t.Fatal("encode of an empty blob is nil")
	}
	// The JSON form of F is replaced by a reference of kind 'j'.
	enc := newSecretCodec(vals).encode([]byte(`{"p":"q\"\\x"}`))
	if !bytes.Contains(enc, []byte("\x10jF\x10")) {
		t.Fatalf("JSON-escaped value not referred to: %q", enc)
	}
}

func TestSecretRefsDecodeErrors(t *testing.T) {
	_, err := decodeRefs([]byte("a\x10sNOPE\x10b"), lookupIn(nil))
	if u, ok := errors.AsType[*unsetVarError](err); !ok || u.name != "NOPE" || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("unset variable: got %v", err)
	}
	for _, bad := range []string{"\x10", "\x10s", "\x10sA", "\x10xA\x10", "\x10s\x10"} {
		if _, err := decodeRefs([]byte(bad), lookupIn(map[string]string{"A": "v"})); !errors.Is(err, errBadReference) {
			t.Errorf("decode(%q) = %v, want errBadReference", bad, err)
		}
	}
	if got := displayRefs("job-\x10sJOB\x10-\x100"); got != "job-${JOB}-\x10" {
		t.Fatalf("displayRefs = %q", got)
	}
}

// FuzzSecretRefs: encode∘decode is the identity for any blob and any set of
// values, including values that overlap, contain the escape byte, or are
// one byte long.
func FuzzSecretRefs(f *testing.F) {
	f.Add([]byte("path/secret/secret-dir"), "secret", "ret/s", "\x10")
	f.Add([]byte("\x10\x10sA\x10"), "A", "\x10s", "s")
	f.Add([]byte{0, 1, 2, 0x10, 0xff}, "\x00", "\x01\x02", "\xff\x10")
	f.Fuzz(func(t *testing.T, b []byte, v1, v2, v3 string) {
		vals := map[string]string{"V1": v1, "V2": v2, "V3": v3}
		checkRoundTrip(t, vals, b)
		// And the same through a snapshot's strings.
		c := newSecretCodec(vals)
		snap := &checkpoint.Snapshot{ID: 1, JobName: string(b), Enumerators: map[string][]byte{string(b): b},
			Tasks: []checkpoint.TaskState{{Vertex: v1, Parts: map[string][][]byte{"w": {b, nil, {}}}}}, Properties: map[string]string{v2: string(b)}}
		want := cloneSnapshot(snap)
		enc := c.encodeSnapshot(snap)
		if !reflect.DeepEqual(snap, want) {
			t.Fatal("encodeSnapshot changed its input")
		}
		if err := decodeSnapshot(enc, lookupIn(vals)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(enc, want) {
			t.Fatalf("snapshot round trip:\n got %#v\nwant %#v", enc, want)
		}
	})
}

func cloneSnapshot(s *checkpoint.Snapshot) *checkpoint.Snapshot {
	c := newSecretCodec(nil)
	e := c.encodeSnapshot(s)
	if err := decodeSnapshot(e, nil); err != nil {
		panic(err)
	}
	return e
}

// TestSecretRefsRandom is a deterministic property test over random
// binary blobs built from pieces of the values.
func TestSecretRefsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', 'b', 0x10, 's', '\\', '"', 0, 0xff}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	for range 3000 {
		vals := map[string]string{}
		for i := range 1 + rng.IntN(4) {
			vals[string(rune('A'+i))] = string(randBytes(1 + rng.IntN(4)))
		}
		var b []byte
		for range rng.IntN(12) {
			if rng.IntN(2) == 0 {
				for _, v := range vals {
					b = append(b, v...)
					break
				}
			} else {
				b = append(b, randBytes(rng.IntN(3))...)
			}
		}
		checkRoundTrip(t, vals, b)
	}
}

// TestSecretStorage: what the wrapped Local stores holds no value, the
// snapshot the runtime passed is unchanged, and Latest, List and a
// savepoint come back exact; a plain Load shows the references and the
// marker; decoding without the variable fails naming it.
func TestSecretStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := checkpoint.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{"TOPIC": "orders-topic", "PREFIX": "tx-prefix-1"}
	st := withSecrets(local, vals, lookupIn(vals))
	if _, ok := st.(engine.JobStorage); !ok {
		t.Fatal("a wrapped Local is no engine.JobStorage")
	}
	snap := &checkpoint.Snapshot{ID: 3, JobName: "job-orders-topic", Timestamp: time.Unix(5, 0).UTC(),
		Enumerators: map[string][]byte{"src": []byte(`{"topic":"orders-topic"}`)},
		Tasks: []checkpoint.TaskState{{Vertex: "sink", Parallelism: 1,
			Parts: map[string][][]byte{"writer": {[]byte("\x0btx-prefix-1-0\x10")}}}},
		Properties: map[string]string{"job.id": "abc"}}
	want := cloneSnapshot(snap)
	if _, err := st.Save(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, want) {
		t.Fatal("Save changed the runtime's snapshot")
	}
	sp, err := st.(engine.SavepointStorage).SaveSavepoint(ctx, filepath.Join(dir, "sp"), snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "chk-3"), sp.Path} {
		raw, _, err := checkpoint.Load(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if raw.Properties[SecretRefsProperty] != "1" || raw.JobName != "job-\x10sTOPIC\x10" {
			t.Fatalf("plain load of %s: job %q, properties %v", p, raw.JobName, raw.Properties)
		}
		for _, b := range append([][]byte{raw.Enumerators["src"]}, raw.Tasks[0].Parts["writer"]...) {
			if bytes.Contains(b, []byte("orders-topic")) || bytes.Contains(b, []byte("tx-prefix-1")) {
				t.Fatalf("%s holds a value: %q", p, b)
			}
		}
		if err := decodeSnapshot(raw, lookupIn(nil)); err == nil || !strings.Contains(err.Error(), "environment variable") {
			t.Fatalf("decode without the variables: %v", err)
		}
		s, _, err := loadRestore(ctx, p, lookupIn(vals))
		if err != nil {
			t.Fatal(err)
		}
		s.Timestamp, s.Kind = snap.Timestamp, snap.Kind
		if !reflect.DeepEqual(s, want) {
			t.Fatalf("loadRestore(%s):\n got %#v\nwant %#v", p, s, want)
		}
	}
	got, _, err := st.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got.Timestamp = snap.Timestamp
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Latest:\n got %#v\nwant %#v", got, want)
	}
}
