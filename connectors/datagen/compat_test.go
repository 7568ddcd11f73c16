package datagen_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestRestoreVersion1Checkpoint restores a checkpoint written when the
// split and enumerator-state serializers were version 1 (JSON; see
// testdata/checkpoint-v1/README.md) and runs the job to its end: the output
// is exactly the records that the checkpoint had not yet committed —
// split-0 from 201, split-1 from 451, split-2 and split-3 (unassigned, in
// the enumerator state) from their start.
func TestRestoreVersion1Checkpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	snap, _, err := checkpoint.Load(ctx, "testdata/checkpoint-v1/chk-4")
	if err != nil {
		t.Fatal(err)
	}
	// The fixture really is version 1 (so the test cannot pass by
	// accident on data the current serializer wrote).
	for _, ts := range snap.Tasks {
		for _, b := range ts.Parts["splits"] {
			if v := int(b[3]); v != 1 {
				t.Fatalf("fixture split written with version %d, want 1", v)
			}
		}
	}
	if v := int(snap.Enumerators["gen"][3]); v != 1 {
		t.Fatalf("fixture enumerator state written with version %d, want 1", v)
	}

	store := testsink.NewStore[int64]()
	// The fixture's two-phase sink kept its transactions in the memory of
	// the process that wrote it; this run collects into a sink of another
	// name, dropping the old sink's state on purpose, and checks the source.
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.RestoreFrom(snap),
		stream.AllowNonRestoredState(), stream.Logger(stream.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(1000), datagen.Splits(4))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewCollect(store), "collect")
	if _, err := env.Execute(ctx, "compat"); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, r := range [][2]int64{{201, 250}, {451, 500}, {500, 1000}} {
		for i := r[0]; i < r[1]; i++ {
			want = append(want, i)
		}
	}
	got := store.Committed()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("resumed output: %d records (first %v), want %d: [201,250) ∪ [451,1000)", len(got), got[:min(5, len(got))], len(want))
	}
}

// TestSerializersReadVersion1 checks that the version 2 serializers decode
// what version 1 wrote, and round-trip their own output.
func TestSerializersReadVersion1(t *testing.T) {
	src := datagen.New(func(i int64) int64 { return i }, datagen.Count(10), datagen.Splits(3))
	sp := datagen.Split{Num: 2, Next: 7, End: 10, Stride: 1}
	v1, err := serde.Marshal(serde.JSON[datagen.Split](1), sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{v1, mustMarshal(t, src.SplitSerializer(), sp)} {
		got, err := serde.Unmarshal(src.SplitSerializer(), b)
		if err != nil || got != sp {
			t.Fatalf("Unmarshal = %+v, %v; want %+v", got, err, sp)
		}
	}
	if src.SplitSerializer().Version() != 2 {
		t.Fatalf("split serializer version %d, want 2", src.SplitSerializer().Version())
	}
	st := datagen.EnumState{Unassigned: []datagen.Split{sp, {Num: 0, Next: 0, End: 4, Stride: 1}}}
	e1, err := serde.Marshal(serde.JSON[datagen.EnumState](1), st)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{e1, mustMarshal(t, src.EnumeratorStateSerializer(), st)} {
		got, err := serde.Unmarshal(src.EnumeratorStateSerializer(), b)
		if err != nil || !slices.Equal(got.Unassigned, st.Unassigned) {
			t.Fatalf("Unmarshal = %+v, %v; want %+v", got, err, st)
		}
	}
	if _, err := src.SplitSerializer().Deserialize(3, nil); err == nil {
		t.Fatal("version 3 decoded")
	}
	if _, err := src.SplitSerializer().Deserialize(2, []byte{0x80}); err == nil {
		t.Fatal("truncated split decoded")
	}
}

func mustMarshal[T any](t *testing.T, s serde.Versioned[T], v T) []byte {
	t.Helper()
	b, err := serde.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
