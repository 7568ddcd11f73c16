package file

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/faultinject"
)

// dirStore is an ObjectStore in memory that completes uploads into files
// under root (the key is the path below it), so the local helpers read
// the output. Uploads are invisible until completed, as on S3.
type dirStore struct {
	root string
	mu   sync.Mutex
	next int
	// uploads by id: key and the bytes of the prepared (or open) upload.
	uploads map[string]*dirUpload
}

type dirUpload struct {
	s        *dirStore
	id, key  string
	data     bytes.Buffer
	prepared bool
}

func newDirStore(root string) *dirStore {
	return &dirStore{root: root, uploads: map[string]*dirUpload{}}
}

func (d *dirStore) Create(_ context.Context, key string) (ObjectUpload, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	u := &dirUpload{s: d, id: fmt.Sprint(d.next), key: key}
	d.uploads[u.id] = u
	return u, nil
}

func (u *dirUpload) Write(p []byte) (int, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	if u.prepared {
		return 0, fmt.Errorf("write after prepare")
	}
	return u.data.Write(p)
}

func (u *dirUpload) Prepare(context.Context) ([]byte, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	u.prepared = true
	return []byte(u.id), nil
}

func (u *dirUpload) Abort(ctx context.Context) error { return u.s.Abort(ctx, u.key, u.id) }

func (d *dirStore) Complete(_ context.Context, key string, handle []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name := filepath.Join(d.root, filepath.FromSlash(key))
	u := d.uploads[string(handle)]
	if u == nil || u.key != key || !u.prepared {
		if _, err := os.Stat(name); err == nil {
			return nil
		}
		return fmt.Errorf("complete %s: %w", key, ErrUploadGone)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(name+".tmp", u.data.Bytes(), 0o644); err != nil {
		return err
	}
	delete(d.uploads, u.id)
	return os.Rename(name+".tmp", name)
}

func (d *dirStore) Uploads(_ context.Context, prefix string) ([]PendingUpload, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []PendingUpload
	for _, u := range d.uploads {
		if len(u.key) >= len(prefix) && u.key[:len(prefix)] == prefix {
			out = append(out, PendingUpload{Key: u.key, UploadID: u.id})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UploadID < out[j].UploadID })
	return out, nil
}

func (d *dirStore) Abort(_ context.Context, _, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.uploads, id)
	return nil
}

func (d *dirStore) Exists(_ context.Context, key string) (bool, error) {
	_, err := os.Stat(filepath.Join(d.root, filepath.FromSlash(key)))
	return err == nil, nil
}

// TestObjectStoreExactlyOnceUnderFailures copies files to a sink on an
// ObjectStore (in memory, completed into a directory) at parallelism 3
// with seeded random failures of every kind: output equals input, and no
// upload is left unfinished. The same runs on versitygw in connectors/s3.
func TestObjectStoreExactlyOnceUnderFailures(t *testing.T) {
	for _, seed := range []int64{11, 12, 13} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := writeInput(t, in, 40, 4000)
			const par = 3
			plan := faultinject.RandomPlan(seed, 6, faultinject.Kinds(), par, int64(len(want))/par/2, 10)
			store := newDirStore("/")
			res, err := runCopy(t, in, out, jobOpts{parallelism: par, plan: plan, restarts: 8,
				sinkOpts: []SinkOption{WithObjectStore(store), Rolling(DefaultRollingPolicy{PartSize: 8 << 10})}})
			if err != nil {
				t.Fatalf("job: %v (fired %v)", err, plan.Fired())
			}
			checkExactlyOnce(t, want, readOutput(t, out), true)
			if ups, _ := store.Uploads(t.Context(), ""); len(ups) > 0 {
				t.Errorf("unfinished uploads left: %v", ups)
			}
			t.Logf("fired %v, %d restarts, %d checkpoints", plan.Fired(), res.Restarts, res.Checkpoints.Completed)
		})
	}
}

// TestObjectStoreRefusesCompaction: compaction renames files, which
// objects cannot do.
func TestObjectStoreRefusesCompaction(t *testing.T) {
	if _, err := NewRowSink("out", LinesFormat(), WithObjectStore(newDirStore(t.TempDir())), Compact(CompactStrategy{SizeThreshold: 10})); err == nil {
		t.Fatal("no error")
	}
}
