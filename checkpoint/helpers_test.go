package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// snap returns a small snapshot with two tasks.
func snap(id int64, kind Kind) *Snapshot {
	return &Snapshot{
		ID:          id,
		Kind:        kind,
		JobName:     "job",
		Timestamp:   t0.Add(time.Duration(id) * time.Second),
		Enumerators: map[string][]byte{"src": []byte(fmt.Sprintf("enum-%d", id))},
		Tasks: []TaskState{
			{Vertex: "src", Subtask: 0, Parallelism: 2, Parts: map[string][][]byte{"splits": {[]byte("a"), []byte("b")}}},
			{Vertex: "src", Subtask: 1, Parallelism: 2, Parts: map[string][][]byte{"splits": {}}},
		},
		Properties: map[string]string{"parallelism/src": "2"},
	}
}

// checkSnapshot reports how got differs from want.
func checkSnapshot(t *testing.T, got, want *Snapshot) {
	t.Helper()
	if got == nil {
		t.Fatalf("got nil snapshot, want %d", want.ID)
	}
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Errorf("Timestamp: got %v, want %v", got.Timestamp, want.Timestamp)
	}
	if got.Timestamp.Location() != time.UTC {
		t.Errorf("Timestamp location: got %v, want UTC", got.Timestamp.Location())
	}
	if got.ID != want.ID || got.Kind != want.Kind || got.JobName != want.JobName {
		t.Errorf("header: got (%d, %s, %q), want (%d, %s, %q)", got.ID, got.Kind, got.JobName, want.ID, want.Kind, want.JobName)
	}
	if !reflect.DeepEqual(got.Enumerators, want.Enumerators) {
		t.Errorf("Enumerators: got %s, want %s", describe(got.Enumerators), describe(want.Enumerators))
	}
	if !reflect.DeepEqual(got.Properties, want.Properties) {
		t.Errorf("Properties: got %#v, want %#v", got.Properties, want.Properties)
	}
	if (got.Tasks == nil) != (want.Tasks == nil) || len(got.Tasks) != len(want.Tasks) {
		t.Fatalf("Tasks: got %d (nil %t), want %d (nil %t)", len(got.Tasks), got.Tasks == nil, len(want.Tasks), want.Tasks == nil)
	}
	for i := range want.Tasks {
		g, w := got.Tasks[i], want.Tasks[i]
		if g.Vertex != w.Vertex || g.Subtask != w.Subtask || g.Parallelism != w.Parallelism {
			t.Errorf("task %d: got (%q, %d, %d), want (%q, %d, %d)", i, g.Vertex, g.Subtask, g.Parallelism, w.Vertex, w.Subtask, w.Parallelism)
		}
		if !reflect.DeepEqual(g.Parts, w.Parts) {
			t.Errorf("task %d parts: got %s, want %s", i, describe(g.Parts), describe(w.Parts))
		}
	}
}

// describe prints a map of blobs without printing megabytes.
func describe[V any](m map[string]V) string {
	if m == nil {
		return "nil"
	}
	var b bytes.Buffer
	b.WriteString("{")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%q: ", k)
		switch v := any(m[k]).(type) {
		case []byte:
			fmt.Fprintf(&b, "%d bytes (nil %t), ", len(v), v == nil)
		case [][]byte:
			fmt.Fprintf(&b, "%d blobs (nil %t) [", len(v), v == nil)
			for _, x := range v {
				fmt.Fprintf(&b, "%d bytes (nil %t), ", len(x), x == nil)
			}
			b.WriteString("], ")
		default:
			fmt.Fprintf(&b, "%v, ", v)
		}
	}
	b.WriteString("}")
	return b.String()
}

func ids(infos []Info) []int64 {
	out := make([]int64, 0, len(infos))
	for _, in := range infos {
		out = append(out, in.ID)
	}
	return out
}

// listed is "chk-3" / "savepoint-4" per Info, for comparisons.
func listed(infos []Info) []string {
	out := make([]string, 0, len(infos))
	for _, in := range infos {
		out = append(out, dirName(in.Kind, in.ID))
	}
	return out
}

func mustSave(t testing.TB, st Storage, s *Snapshot) Info {
	t.Helper()
	info, err := st.Save(context.Background(), s)
	if err != nil {
		t.Fatalf("Save(%d): %v", s.ID, err)
	}
	if info.Warning != nil {
		t.Fatalf("Save(%d) warning: %v", s.ID, info.Warning)
	}
	return info
}

func mustList(t testing.TB, st Storage) []Info {
	t.Helper()
	infos, err := st.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return infos
}

// dirEntries lists the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		switch e.Name() {
		case latestFileName, jobFileName, lockFileName: // the storage's bookkeeping
			continue
		}
		names = append(names, e.Name())
	}
	return names
}

// fault makes one operation fail once. op is one of mkdir, create, write,
// sync, close, rename, remove, removeall, syncdir; path is matched exactly.
type fault struct {
	op, path string
	err      error // an errno
}

// faultFS is the os file system with injected faults, each firing once.
type faultFS struct {
	osFS
	mu     sync.Mutex
	faults []fault
	fired  []fault
}

func (f *faultFS) check(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ft := range f.faults {
		if ft.op == op && ft.path == path {
			f.faults = slices.Delete(f.faults, i, i+1)
			f.fired = append(f.fired, ft)
			return ft.err
		}
	}
	return nil
}

func (f *faultFS) arm(fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fs...)
}

func (f *faultFS) unfired() []fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.faults)
}

func (f *faultFS) Mkdir(path string, perm fs.FileMode) error {
	if err := f.check("mkdir", path); err != nil {
		return &fs.PathError{Op: "mkdir", Path: path, Err: err}
	}
	return f.osFS.Mkdir(path, perm)
}

func (f *faultFS) CreateExcl(path string) (writableFile, error) {
	if err := f.check("create", path); err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	w, err := f.osFS.CreateExcl(path)
	if err != nil {
		return nil, err
	}
	return &faultFile{w: w, fs: f, path: path}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.check("rename", oldpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return f.osFS.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(path string) error {
	if err := f.check("remove", path); err != nil {
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	return f.osFS.Remove(path)
}

func (f *faultFS) RemoveAll(path string) error {
	if err := f.check("removeall", path); err != nil {
		return &fs.PathError{Op: "unlinkat", Path: path, Err: err}
	}
	return f.osFS.RemoveAll(path)
}

func (f *faultFS) SyncDir(path string) error {
	if err := f.check("syncdir", path); err != nil {
		return &fs.PathError{Op: "sync", Path: path, Err: err}
	}
	return f.osFS.SyncDir(path)
}

type faultFile struct {
	w    writableFile
	fs   *faultFS
	path string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.check("write", f.path); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.path, Err: err}
	}
	return f.w.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check("sync", f.path); err != nil {
		return &fs.PathError{Op: "sync", Path: f.path, Err: err}
	}
	return f.w.Sync()
}

func (f *faultFile) Close() error {
	err := f.w.Close()
	if ferr := f.fs.check("close", f.path); ferr != nil {
		return &fs.PathError{Op: "close", Path: f.path, Err: ferr}
	}
	return err
}

// flipByte flips the bits of the byte at off (negative: from the end).
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func statePath(dir string, k Kind, id int64) string {
	return filepath.Join(dir, dirName(k, id), stateFileName)
}
