package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := checkpoint.NewLocal(dir, checkpoint.Retain(2))
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for id := int64(1); id <= 3; id++ {
		_, err := store.Save(ctx, &checkpoint.Snapshot{
			ID:          id,
			JobName:     "orders-to-files",
			Timestamp:   start.Add(time.Duration(id) * time.Second),
			Enumerators: map[string][]byte{"orders": []byte("unassigned: p3")},
			Tasks: []checkpoint.TaskState{
				{Vertex: "orders", Subtask: 0, Parallelism: 1, Parts: map[string][][]byte{
					"splits": {fmt.Appendf(nil, "p0@%d", id*100)},
				}},
			},
			Properties: map[string]string{"parallelism/orders": "1"},
		})
		if err != nil {
			log.Fatal(err)
		}
	}

	infos, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range infos {
		fmt.Println(in.Kind, in.ID, filepath.Base(in.Path), in.Timestamp.Format(time.TimeOnly))
	}

	// Recovery: restore from the newest complete checkpoint.
	snap, info, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if info.Warning != nil {
		// Newer checkpoints were corrupt and skipped: say so loudly.
		log.Printf("restoring from an older checkpoint: %v", info.Warning)
	}
	fmt.Printf("restore checkpoint %d: %s\n", snap.ID, snap.Tasks[0].Parts["splits"][0])
	// Output:
	// checkpoint 2 chk-2 03:04:07
	// checkpoint 3 chk-3 03:04:08
	// restore checkpoint 3: p0@300
}

// A savepoint is a self-contained directory: it can be moved and still loads.
func ExampleSaveSavepoint() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-savepoints")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	info, err := checkpoint.SaveSavepoint(ctx, dir, &checkpoint.Snapshot{ID: 7, JobName: "orders-to-files"})
	if err != nil {
		log.Fatal(err)
	}
	moved := filepath.Join(dir, "before-upgrade")
	if err := os.Rename(info.Path, moved); err != nil {
		log.Fatal(err)
	}
	snap, _, err := checkpoint.Load(ctx, moved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(snap.Kind, snap.ID, snap.JobName)
	// Output: savepoint 7 orders-to-files
}
