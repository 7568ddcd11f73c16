package s3

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

func testSnapshot(id int64) *checkpoint.Snapshot {
	return &checkpoint.Snapshot{ID: id, JobName: "j", Timestamp: time.Unix(100+id, 5),
		Enumerators: map[string][]byte{"src": []byte("enum")},
		Tasks:       []checkpoint.TaskState{{Vertex: "v", Subtask: 0, Parallelism: 1, Parts: map[string][][]byte{"writer": {[]byte("w"), nil}}}}}
}

// TestCheckpointStorage saves, lists, prunes, loads the latest, refuses a
// second save of one id (the conditional PUT), never falls back past a
// damaged newest checkpoint, and records the job id once.
func TestCheckpointStorage(t *testing.T) {
	c, bucket := testClient(t)
	ctx := t.Context()
	st, err := c.CheckpointStorage("s3://"+bucket+"/jobs/a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Latest(ctx); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Latest of an empty storage: %v", err)
	}
	for id := int64(1); id <= 5; id++ {
		info, err := st.Save(ctx, testSnapshot(id))
		if err != nil || info.Warning != nil {
			t.Fatalf("save %d: %v %v", id, err, info.Warning)
		}
	}
	if _, err := st.Save(ctx, testSnapshot(5)); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second save of 5: %v, want ErrExists", err)
	}
	// The publish itself is conditional: a _metadata that appeared
	// between the check and the PUT is not overwritten.
	if err := st.put(ctx, "jobs/a/chk-5/_metadata", []byte("{}"), true); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("conditional PUT over an existing _metadata: %v, want ErrExists", err)
	}
	infos, err := st.List(ctx)
	if err != nil || len(infos) != 3 || infos[0].ID != 3 || infos[2].ID != 5 {
		t.Fatalf("List = %+v, %v; want 3, 4, 5", infos, err)
	}
	snap, info, err := st.Latest(ctx)
	if err != nil || snap.ID != 5 || string(snap.Tasks[0].Parts["writer"][0]) != "w" || info.Path != "s3://"+bucket+"/jobs/a/chk-5" {
		t.Fatalf("Latest = %+v %+v %v", snap, info, err)
	}
	if s, _, err := c.Load(ctx, "s3://"+bucket+"/jobs/a/chk-4"); err != nil || s.ID != 4 {
		t.Fatalf("Load chk-4: %v", err)
	}
	if s, _, err := c.Load(ctx, "s3://"+bucket+"/jobs/a"); err != nil || s.ID != 5 {
		t.Fatalf("Load dir: %v", err)
	}
	// Damage the newest: its state disappears.
	if err := st.del(ctx, "jobs/a/chk-5/state"); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Latest(ctx)
	var de *checkpoint.DamagedError
	if !errors.As(err, &de) || de.ID != 5 || !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("Latest with chk-5 damaged: %v, want a DamagedError of 5", err)
	}
	// The newest recorded checkpoint's _metadata deleted: still no fallback.
	if err := st.del(ctx, "jobs/a/chk-5/_metadata"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Latest(ctx); !errors.As(err, &de) || de.ID != 5 {
		t.Fatalf("Latest with chk-5 gone but recorded in _latest: %v", err)
	}
	if err := st.SetJobID("job1"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetJobID("job1"); err != nil {
		t.Fatalf("SetJobID again with the same id: %v", err)
	}
	if err := st.SetJobID("job2"); err == nil {
		t.Fatal("SetJobID with another id: no error")
	}
	if id, err := st.JobID(); err != nil || id != "job1" {
		t.Fatalf("JobID = %q, %v", id, err)
	}
}
