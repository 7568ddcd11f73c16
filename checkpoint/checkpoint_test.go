package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// storageGetter is a Storage that also loads by kind and id.
type storageGetter interface {
	Storage
	Get(ctx context.Context, kind Kind, id int64) (*Snapshot, Info, error)
}

var storages = []struct {
	name string
	open func(t testing.TB, opts ...Option) storageGetter
}{
	{"local", func(t testing.TB, opts ...Option) storageGetter {
		l, err := NewLocal(t.TempDir(), opts...)
		if err != nil {
			t.Fatalf("NewLocal: %v", err)
		}
		return l
	}},
	{"memory", func(t testing.TB, opts ...Option) storageGetter { return NewMemory(opts...) }},
}

func TestKind(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{Checkpoint, "checkpoint"},
		{Savepoint, "savepoint"},
		{Kind(7), "Kind(7)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(tt.kind), got, tt.want)
		}
		b, err := tt.kind.MarshalText()
		if !tt.kind.valid() {
			if err == nil {
				t.Errorf("Kind(%d).MarshalText() = %q, want error", int(tt.kind), b)
			}
			continue
		}
		var k Kind
		if err != nil || k.UnmarshalText(b) != nil || k != tt.kind {
			t.Errorf("Kind %s text round trip: got %v (%v), want %v", tt.want, k, err, tt.kind)
		}
	}
	var k Kind
	if err := k.UnmarshalText([]byte("Checkpoint")); err == nil {
		t.Errorf("UnmarshalText(%q): got nil error, want one", "Checkpoint")
	}
}

func roundTripCases() []struct {
	name string
	snap *Snapshot
} {
	large := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{1, 2}).Read(large)
	many := make([]TaskState, 5000)
	for i := range many {
		many[i] = TaskState{Vertex: fmt.Sprintf("v%d", i%7), Subtask: i, Parallelism: len(many),
			Parts: map[string][][]byte{"splits": {[]byte(fmt.Sprint(i))}, "writer": {make([]byte, i%300)}}}
	}
	return []struct {
		name string
		snap *Snapshot
	}{
		{"all nil", &Snapshot{ID: 1, Timestamp: t0}},
		{"all empty", &Snapshot{ID: 2, Timestamp: t0, JobName: "j",
			Enumerators: map[string][]byte{}, Tasks: []TaskState{}, Properties: map[string]string{}}},
		{"several tasks", &Snapshot{ID: 3, JobName: "orders", Timestamp: t0,
			Enumerators: map[string][]byte{"kafka": []byte("enum"), "files": {}, "nil-state": nil},
			Tasks: []TaskState{
				{Vertex: "kafka", Subtask: 0, Parallelism: 3, Parts: map[string][][]byte{
					"splits": {[]byte("p0@12"), []byte("p3@99")},
					"empty":  {},
					"nil":    nil,
					"blobs":  {nil, {}, []byte{0}},
				}},
				{Vertex: "kafka", Subtask: 1, Parallelism: 3, Parts: map[string][][]byte{}},
				{Vertex: "kafka", Subtask: 2, Parallelism: 3},
				{Vertex: "sink", Subtask: 0, Parallelism: 1, Parts: map[string][][]byte{
					"writer":         {[]byte("w")},
					"committables/3": {[]byte("txn-3-0"), []byte("txn-3-1")},
					"committables/2": {[]byte("txn-2-0")},
					"":               {[]byte("empty name")},
				}},
			},
			Properties: map[string]string{"parallelism/kafka": "3", "parallelism/sink": "1", "": ""},
		}},
		{"large blob", &Snapshot{ID: 4, Timestamp: t0,
			Enumerators: map[string][]byte{"big": large[:1<<20]},
			Tasks:       []TaskState{{Vertex: "v", Parallelism: 1, Parts: map[string][][]byte{"writer": {large, []byte("after")}}}},
		}},
		{"unicode", &Snapshot{ID: 5, JobName: "注文→ファイル", Timestamp: t0,
			Enumerators: map[string][]byte{"источник-🚰": []byte("é")},
			Tasks:       []TaskState{{Vertex: "源/読み取り-🚰", Parallelism: 1, Parts: map[string][][]byte{"分割": {[]byte("ü")}}}},
			Properties:  map[string]string{"parallelism/源/読み取り-🚰": "1", "ключ": "значение"},
		}},
		{"savepoint", &Snapshot{ID: 6, Kind: Savepoint, JobName: "j", Timestamp: t0, Tasks: many[:3]}},
		{"5000 tasks", &Snapshot{ID: 7, JobName: "wide", Timestamp: t0, Tasks: many}},
		{"extreme values", &Snapshot{ID: math.MaxInt64, Timestamp: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
			Tasks: []TaskState{{Vertex: "v", Subtask: math.MinInt, Parallelism: math.MaxInt}}}},
		{"far future, other zone", &Snapshot{ID: 0, Timestamp: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", 3600))}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, st := range storages {
		for _, tt := range roundTripCases() {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				ctx := context.Background()
				s := st.open(t)
				info := mustSave(t, s, tt.snap)
				if info.ID != tt.snap.ID || info.Kind != tt.snap.Kind || info.JobName != tt.snap.JobName || !info.Timestamp.Equal(tt.snap.Timestamp) {
					t.Errorf("Save info: got %+v, want id %d kind %s job %q time %v", info, tt.snap.ID, tt.snap.Kind, tt.snap.JobName, tt.snap.Timestamp)
				}
				if want := encodedSize(tt.snap); info.Size != want {
					t.Errorf("Save info size: got %d, want %d", info.Size, want)
				}
				if _, isLocal := s.(*Local); isLocal != (info.Path != "") {
					t.Errorf("Save info path: got %q", info.Path)
				}

				got, ginfo, err := s.Get(ctx, tt.snap.Kind, tt.snap.ID)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				checkSnapshot(t, got, tt.snap)
				if ginfo.ID != info.ID || ginfo.Size != info.Size || ginfo.Path != info.Path || !ginfo.Timestamp.Equal(info.Timestamp) {
					t.Errorf("Get info: got %+v, want %+v", ginfo, info)
				}
				if info.Path != "" {
					got, _, err := Load(ctx, info.Path)
					if err != nil {
						t.Fatalf("Load(%s): %v", info.Path, err)
					}
					checkSnapshot(t, got, tt.snap)
					if fi, err := os.Stat(filepath.Join(info.Path, stateFileName)); err != nil || fi.Size() != info.Size {
						t.Errorf("state file: got size %v (%v), want %d", fi.Size(), err, info.Size)
					}
				}

				latest, linfo, err := s.Latest(ctx)
				if tt.snap.Kind == Savepoint {
					if !errors.Is(err, ErrNotFound) {
						t.Errorf("Latest with only a savepoint: got %v, want ErrNotFound", err)
					}
					return
				}
				if err != nil || linfo.Warning != nil {
					t.Fatalf("Latest: %v (warning %v)", err, linfo.Warning)
				}
				checkSnapshot(t, latest, tt.snap)
			})
		}
	}
}

func TestSaveDefaultsTimestamp(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			before := time.Now()
			info := mustSave(t, s, &Snapshot{ID: 1})
			after := time.Now()
			if info.Timestamp.Before(before.Truncate(time.Second)) || info.Timestamp.After(after) {
				t.Errorf("Timestamp: got %v, want between %v and %v", info.Timestamp, before, after)
			}
			got, _, err := s.Latest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !got.Timestamp.Equal(info.Timestamp) {
				t.Errorf("loaded Timestamp: got %v, want %v", got.Timestamp, info.Timestamp)
			}
		})
	}
}

func TestSaveRejectsInvalid(t *testing.T) {
	tests := []struct {
		name string
		snap *Snapshot
	}{
		{"nil", nil},
		{"negative id", &Snapshot{ID: -1}},
		{"bad kind", &Snapshot{ID: 1, Kind: 9}},
		{"year 10000", &Snapshot{ID: 1, Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"year 9999 becomes 10000 in UTC", &Snapshot{ID: 1, Timestamp: time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("w", -7200))}},
	}
	for _, st := range storages {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				s := st.open(t)
				if _, err := s.Save(context.Background(), tt.snap); err == nil {
					t.Fatal("Save: got nil error, want one")
				}
				if got := mustList(t, s); len(got) != 0 {
					t.Errorf("List: got %v, want nothing", listed(got))
				}
			})
		}
	}
}

func TestSaveExisting(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			mustSave(t, s, snap(1, Checkpoint))
			mustSave(t, s, snap(1, Savepoint)) // another kind, same id
			other := snap(1, Checkpoint)
			other.JobName = "other"
			if _, err := s.Save(context.Background(), other); !errors.Is(err, ErrExists) {
				t.Fatalf("second Save: got %v, want ErrExists", err)
			}
			got, _, err := s.Get(context.Background(), Checkpoint, 1)
			if err != nil {
				t.Fatal(err)
			}
			checkSnapshot(t, got, snap(1, Checkpoint))
		})
	}
}

func TestRetention(t *testing.T) {
	// Saved in this order: checkpoints 1, 2, savepoint 3, checkpoints 4, 5,
	// savepoint 6, checkpoint 7.
	seq := []struct {
		id   int64
		kind Kind
	}{{1, Checkpoint}, {2, Checkpoint}, {3, Savepoint}, {4, Checkpoint}, {5, Checkpoint}, {6, Savepoint}, {7, Checkpoint}}
	tests := []struct {
		name string
		opts []Option
		want []string
	}{
		{"default keeps 3", nil, []string{"savepoint-3", "chk-4", "chk-5", "savepoint-6", "chk-7"}},
		{"retain 1", []Option{Retain(1)}, []string{"savepoint-3", "savepoint-6", "chk-7"}},
		{"retain 2", []Option{Retain(2)}, []string{"savepoint-3", "chk-5", "savepoint-6", "chk-7"}},
		{"retain 10", []Option{Retain(10)}, []string{"chk-1", "chk-2", "savepoint-3", "chk-4", "chk-5", "savepoint-6", "chk-7"}},
		{"retain 0 keeps all", []Option{Retain(0)}, []string{"chk-1", "chk-2", "savepoint-3", "chk-4", "chk-5", "savepoint-6", "chk-7"}},
	}
	for _, st := range storages {
		for _, tt := range tests {
			t.Run(st.name+"/"+tt.name, func(t *testing.T) {
				s := st.open(t, tt.opts...)
				for _, x := range seq {
					mustSave(t, s, snap(x.id, x.kind))
				}
				if got := listed(mustList(t, s)); !slices.Equal(got, tt.want) {
					t.Errorf("List: got %v, want %v", got, tt.want)
				}
				if l, ok := s.(*Local); ok {
					if got := dirEntries(t, l.Dir()); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tt.want))) {
						t.Errorf("directory: got %v, want %v", got, tt.want)
					}
				}
				latest, _, err := s.Latest(context.Background())
				if err != nil || latest.ID != 7 {
					t.Errorf("Latest: got %v (%v), want 7", latest, err)
				}
			})
		}
	}
}

func TestRetentionKeepsJustSaved(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t, Retain(2))
			for _, id := range []int64{10, 11, 5} {
				mustSave(t, s, snap(id, Checkpoint))
			}
			if got, want := ids(mustList(t, s)), []int64{5, 11}; !slices.Equal(got, want) {
				t.Errorf("List: got %v, want %v", got, want)
			}
		})
	}
}

func TestIncompleteDirectories(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	mustSave(t, l, snap(1, Checkpoint))
	mustSave(t, l, snap(2, Checkpoint))

	// chk-3: state written, crashed before _metadata.
	// chk-4: crashed between writing _metadata.tmp and the rename.
	// savepoint-5: incomplete savepoint. chk-6 is a file, other-dir is not ours.
	mkdir := func(name string, files ...string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, name, f), []byte("partial"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mkdir("chk-3", stateFileName)
	mkdir("chk-4", stateFileName, metadataTmpName)
	mkdir("savepoint-5", stateFileName)
	mkdir("other-dir", metadataFileName)
	if err := os.WriteFile(filepath.Join(dir, "chk-6"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	if got, want := ids(mustList(t, l)), []int64{1, 2}; !slices.Equal(got, want) {
		t.Errorf("List: got %v, want %v", got, want)
	}
	if infos, err := ListDir(ctx, dir); err != nil || !slices.Equal(ids(infos), []int64{1, 2}) {
		t.Errorf("ListDir: got %v (%v), want [1 2]", ids(infos), err)
	}
	if s, info, err := l.Latest(ctx); err != nil || s.ID != 2 || info.Warning != nil {
		t.Errorf("Latest: got %v, warning %v, err %v; want 2 without warning", s, info.Warning, err)
	}
	if _, _, err := Load(ctx, filepath.Join(dir, "chk-3")); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), filepath.Join(dir, "chk-3")) {
		t.Errorf("Load(chk-3): got %v, want ErrNotFound naming the path", err)
	}

	mustSave(t, l, snap(7, Checkpoint))
	// Incomplete checkpoints are removed; everything else stays (retain 3
	// keeps chk-1, chk-2 and chk-7).
	want := []string{"chk-1", "chk-2", "chk-6", "chk-7", "other-dir", "savepoint-5"}
	if got := dirEntries(t, dir); !slices.Equal(got, want) {
		t.Errorf("after Save: directory holds %v, want %v", got, want)
	}
}

// saved writes checkpoints 1..3 into a fresh Local and returns it.
func saved(t *testing.T) *Local {
	t.Helper()
	l, err := NewLocal(t.TempDir(), Retain(10))
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		s := snap(id, Checkpoint)
		s.Tasks[0].Parts["writer"] = [][]byte{[]byte(strings.Repeat("payload ", 100))}
		mustSave(t, l, s)
	}
	return l
}

// editMetadata rewrites a snapshot's _metadata through fn.
func editMetadata(t *testing.T, dir string, fn func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, metadataFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceState writes b as dir's state file and fixes size and CRC in
// _metadata, so that only the content is wrong.
func replaceState(t *testing.T, dir string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, stateFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cw := crcWriter{w: &countWriter{}}
	cw.Write(b)
	editMetadata(t, dir, func(m map[string]any) {
		m["stateSize"] = len(b)
		m["stateCRC32C"] = cw.crc
	})
}

func stateBytes(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCorrupt(t *testing.T) {
	tests := []struct {
		name        string
		corrupt     func(t *testing.T, dir string)
		file        string // the file the error must name
		wantVersion bool   // ErrUnsupportedVersion too
		wantMsg     string
	}{
		{"flipped byte in a blob", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, stateFileName), -100)
		}, stateFileName, false, "CRC-32C mismatch"},
		{"flipped byte in the magic", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, stateFileName), 0)
		}, stateFileName, false, "CRC-32C mismatch"},
		{"flipped byte in a length", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, stateFileName), 8)
		}, stateFileName, false, "CRC-32C mismatch"},
		{"flipped trailer", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, stateFileName), -1)
		}, stateFileName, false, "CRC-32C mismatch"},
		{"truncated", func(t *testing.T, dir string) {
			b := stateBytes(t, dir)
			os.WriteFile(filepath.Join(dir, stateFileName), b[:len(b)-10], 0o644)
		}, stateFileName, false, "metadata says"},
		{"truncated, metadata fixed", func(t *testing.T, dir string) {
			b := stateBytes(t, dir)
			replaceState(t, dir, b[:len(b)-10])
		}, stateFileName, false, "bytes left"},
		{"trailing bytes, metadata fixed", func(t *testing.T, dir string) {
			replaceState(t, dir, append(stateBytes(t, dir), 1, 2, 3))
		}, stateFileName, false, "after the trailer"},
		{"state version 2", func(t *testing.T, dir string) {
			b := stateBytes(t, dir)
			b[5] = 2
			replaceState(t, dir, b)
		}, stateFileName, true, "format version 2"},
		{"huge task count", func(t *testing.T, dir string) {
			var buf strings.Builder
			e := encoder{w: &buf}
			e.write([]byte(stateMagic))
			e.write([]byte{0, formatVersion})
			e.varint(3)
			e.uvarint(0)
			e.str("job")
			ts := t0.Add(3 * time.Second)
			e.varint(ts.Unix())
			e.uvarint(uint64(ts.Nanosecond()))
			e.count(0, true)
			e.count(0, true)
			e.uvarint(1 << 50)
			replaceState(t, dir, []byte(buf.String()))
		}, stateFileName, false, "exceeds"},
		{"huge blob length", func(t *testing.T, dir string) {
			b := stateBytes(t, dir)
			i := strings.Index(string(b), "payload") - 2 // the blob's length varint (2 bytes) sits before it
			b = append(b[:i:i], 0xff, 0xff, 0xff, 0xff, 0x0f)
			replaceState(t, dir, b)
		}, stateFileName, false, "exceeds"},
		{"state file missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, stateFileName))
		}, stateFileName, false, "state file missing"},
		{"wrong CRC in metadata", func(t *testing.T, dir string) {
			editMetadata(t, dir, func(m map[string]any) { m["stateCRC32C"] = 12345 })
		}, stateFileName, false, "CRC-32C mismatch"},
		{"metadata not JSON", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, metadataFileName), []byte("{\"formatVersion\": 1,"), 0o644)
		}, metadataFileName, false, "invalid metadata"},
		{"metadata version 2", func(t *testing.T, dir string) {
			editMetadata(t, dir, func(m map[string]any) { m["formatVersion"] = 2 })
		}, metadataFileName, true, "format version 2"},
		{"metadata points outside", func(t *testing.T, dir string) {
			editMetadata(t, dir, func(m map[string]any) { m["stateFile"] = "../chk-2/state" })
		}, metadataFileName, false, "invalid state file name"},
		{"metadata disagrees with state", func(t *testing.T, dir string) {
			editMetadata(t, dir, func(m map[string]any) { m["job"] = "other" })
		}, stateFileName, false, `state is of job "job", metadata says "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			l := saved(t)
			dir := filepath.Join(l.Dir(), "chk-3")
			tt.corrupt(t, dir)
			wantPath := filepath.Join(dir, tt.file)

			_, _, err := Load(ctx, dir)
			t.Logf("Load: %v", err)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load: got %v, want ErrCorrupt", err)
			}
			if errors.Is(err, ErrUnsupportedVersion) != tt.wantVersion {
				t.Errorf("Load: errors.Is(err, ErrUnsupportedVersion) = %t, want %t (err %v)", !tt.wantVersion, tt.wantVersion, err)
			}
			if msg := err.Error(); !strings.Contains(msg, wantPath) || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("Load: got %q, want it to name %s and say %q", msg, wantPath, tt.wantMsg)
			}

			// Latest refuses rather than fall back past the completed
			// checkpoint 3, naming it and what is wrong.
			s, _, err := l.Latest(ctx)
			if err == nil {
				t.Fatalf("Latest: got checkpoint %d, want an error about checkpoint 3", s.ID)
			}
			if !errors.Is(err, ErrDamaged) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), wantPath) || !strings.Contains(err.Error(), "checkpoint 3") {
				t.Errorf("Latest: got %v, want ErrDamaged and ErrCorrupt naming checkpoint 3 and %s", err, wantPath)
			}
			// The older one stays loadable on explicit request.
			s, _, err = l.Get(ctx, Checkpoint, 2)
			if err != nil {
				t.Fatalf("Get(2): %v", err)
			}
			checkSnapshot(t, s, func() *Snapshot {
				w := snap(2, Checkpoint)
				w.Tasks[0].Parts["writer"] = [][]byte{[]byte(strings.Repeat("payload ", 100))}
				return w
			}())
		})
	}
}

func TestLatestNoCheckpoint(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			if _, _, err := s.Latest(context.Background()); !errors.Is(err, ErrNotFound) {
				t.Errorf("Latest on empty storage: got %v, want ErrNotFound", err)
			}
			mustSave(t, s, snap(1, Savepoint))
			if _, _, err := s.Latest(context.Background()); !errors.Is(err, ErrNotFound) {
				t.Errorf("Latest with only savepoints: got %v, want ErrNotFound", err)
			}
		})
	}
}

func TestLatestAllCorrupt(t *testing.T) {
	l := saved(t)
	for id := int64(1); id <= 3; id++ {
		flipByte(t, statePath(l.Dir(), Checkpoint, id), -50)
	}
	s, _, err := l.Latest(context.Background())
	if s != nil || !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrDamaged) || errors.Is(err, ErrNotFound) {
		t.Fatalf("Latest: got %v, %v; want ErrDamaged, ErrCorrupt and not ErrNotFound", s, err)
	}
	if p := statePath(l.Dir(), Checkpoint, 3); !strings.Contains(err.Error(), p) {
		t.Errorf("Latest error %q does not name %s", err, p)
	}
}

func TestLatestDoesNotSkipIOErrors(t *testing.T) {
	l := saved(t)
	// A state file that cannot be opened (a symlink loop) is not corruption:
	// Latest must fail rather than fall back.
	p := statePath(l.Dir(), Checkpoint, 3)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stateFileName, p); err != nil {
		t.Fatal(err)
	}
	s, _, err := l.Latest(context.Background())
	if err == nil {
		t.Fatalf("Latest: got %d, want an error", s.ID)
	}
	if errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), p) {
		t.Errorf("Latest: got %v, want ELOOP (not ErrCorrupt) naming %s", err, p)
	}
}

func TestListDirReportsBadMetadata(t *testing.T) {
	ctx := context.Background()
	l := saved(t)
	if err := os.WriteFile(filepath.Join(l.Dir(), "chk-2", metadataFileName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory renamed inside the storage: its name no longer matches.
	if err := os.Rename(filepath.Join(l.Dir(), "chk-1"), filepath.Join(l.Dir(), "chk-9")); err != nil {
		t.Fatal(err)
	}
	infos, err := ListDir(ctx, l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listed(infos), []string{"chk-2", "chk-3", "chk-9"}; !slices.Equal(got, want) {
		t.Fatalf("ListDir: got %v, want %v", got, want)
	}
	for i, wantWarn := range []bool{true, false, true} {
		in := infos[i]
		if (in.Warning != nil) != wantWarn || (wantWarn && !errors.Is(in.Warning, ErrCorrupt)) {
			t.Errorf("%s: warning %v, want corrupt warning %t", in.Path, in.Warning, wantWarn)
		}
		if wantWarn && !strings.Contains(in.Warning.Error(), in.Path) {
			t.Errorf("%s: warning %q does not name the path", in.Path, in.Warning)
		}
	}
	// chk-9 is newest by name but describes checkpoint 1: Latest refuses
	// and names it rather than fall back to 3.
	if s, _, err := l.Latest(ctx); !errors.Is(err, ErrDamaged) || !strings.Contains(fmt.Sprint(err), "chk-9") {
		t.Fatalf("Latest: got %v, %v; want ErrDamaged naming chk-9", s, err)
	}
	if _, err := ListDir(ctx, filepath.Join(l.Dir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ListDir(missing): got %v, want fs.ErrNotExist", err)
	}
}

func TestMovedSavepoint(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	spDir := filepath.Join(base, "savepoints", "nested")
	want := snap(42, Checkpoint) // SaveSavepoint makes it a savepoint
	info, err := SaveSavepoint(ctx, spDir, want)
	if err != nil {
		t.Fatal(err)
	}
	want.Kind = Savepoint
	if got := filepath.Join(spDir, "savepoint-42"); info.Path != got || info.Kind != Savepoint {
		t.Errorf("SaveSavepoint info: got %s at %s, want savepoint at %s", info.Kind, info.Path, got)
	}
	if _, err := SaveSavepoint(ctx, spDir, want); !errors.Is(err, ErrExists) {
		t.Errorf("second SaveSavepoint: got %v, want ErrExists", err)
	}
	if infos, err := ListDir(ctx, spDir); err != nil || !slices.Equal(listed(infos), []string{"savepoint-42"}) {
		t.Errorf("ListDir: got %v (%v), want [savepoint-42]", listed(infos), err)
	}

	moved := filepath.Join(base, "elsewhere", "my savepoint")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(info.Path, moved); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{moved, filepath.Join(moved, metadataFileName)} {
		got, ginfo, err := Load(ctx, path)
		if err != nil {
			t.Fatalf("Load(%s): %v", path, err)
		}
		checkSnapshot(t, got, want)
		if ginfo.Path != moved || ginfo.Kind != Savepoint || ginfo.ID != 42 {
			t.Errorf("Load(%s) info: got %+v, want savepoint 42 at %s", path, ginfo, moved)
		}
	}
	if infos, err := ListDir(ctx, spDir); err != nil || len(infos) != 0 {
		t.Errorf("ListDir after move: got %v (%v), want nothing", listed(infos), err)
	}
}

func TestLocalSavepointsAndLatest(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(t.TempDir(), Retain(1))
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, l, snap(1, Checkpoint))
	mustSave(t, l, snap(2, Savepoint))
	s, _, err := l.Latest(ctx)
	if err != nil || s.ID != 1 {
		t.Fatalf("Latest: got %v (%v), want checkpoint 1 (savepoint 2 ignored)", s, err)
	}
	// SaveSavepoint into the storage's own directory.
	if _, err := SaveSavepoint(ctx, l.Dir(), snap(3, Savepoint)); err != nil {
		t.Fatal(err)
	}
	mustSave(t, l, snap(4, Checkpoint))
	if got, want := listed(mustList(t, l)), []string{"savepoint-2", "savepoint-3", "chk-4"}; !slices.Equal(got, want) {
		t.Errorf("List: got %v, want %v", got, want)
	}
}

func TestDiscard(t *testing.T) {
	ctx := context.Background()
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t, Retain(0))
			mustSave(t, s, snap(1, Checkpoint))
			mustSave(t, s, snap(2, Savepoint))
			mustSave(t, s, snap(3, Checkpoint))
			mustSave(t, s, snap(3, Savepoint))
			for _, id := range []int64{2, 3} {
				if err := s.Discard(ctx, id); err != nil {
					t.Fatalf("Discard(%d): %v", id, err)
				}
			}
			if err := s.Discard(ctx, 2); !errors.Is(err, ErrNotFound) {
				t.Errorf("Discard(2) again: got %v, want ErrNotFound", err)
			}
			if got := listed(mustList(t, s)); !slices.Equal(got, []string{"chk-1"}) {
				t.Errorf("List: got %v, want [chk-1]", got)
			}
			if l, ok := s.(*Local); ok {
				if got := dirEntries(t, l.Dir()); !slices.Equal(got, []string{"chk-1"}) {
					t.Errorf("directory: got %v, want [chk-1]", got)
				}
			}
			if _, _, err := s.Get(ctx, Checkpoint, 3); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(3): got %v, want ErrNotFound", err)
			}
		})
	}
}

func TestFailedSave(t *testing.T) {
	dir := t.TempDir()
	chk5 := filepath.Join(dir, "chk-5")
	state := filepath.Join(chk5, stateFileName)
	tmp := filepath.Join(chk5, metadataTmpName)
	tests := []struct {
		name   string
		faults []fault
		want   error  // errors.Is
		msg    string // exact error text, if set
		left   bool   // the failed directory may stay behind (its removal failed too)
	}{
		{"mkdir", []fault{{"mkdir", chk5, syscall.EACCES}}, syscall.EACCES,
			"checkpoint 5: mkdir " + chk5 + ": permission denied", false},
		{"create state", []fault{{"create", state, syscall.EMFILE}}, syscall.EMFILE, "", false},
		{"write state", []fault{{"write", state, syscall.ENOSPC}}, syscall.ENOSPC,
			"checkpoint 5: write " + state + ": no space left on device", false},
		{"fsync state", []fault{{"sync", state, syscall.EIO}}, syscall.EIO,
			"checkpoint 5: sync " + state + ": input/output error", false},
		{"close state", []fault{{"close", state, syscall.EDQUOT}}, syscall.EDQUOT, "", false},
		{"create metadata", []fault{{"create", tmp, syscall.ENOSPC}}, syscall.ENOSPC, "", false},
		{"write metadata", []fault{{"write", tmp, syscall.ENOSPC}}, syscall.ENOSPC, "", false},
		{"fsync metadata", []fault{{"sync", tmp, syscall.EIO}}, syscall.EIO, "", false},
		{"close metadata", []fault{{"close", tmp, syscall.EIO}}, syscall.EIO, "", false},
		{"rename metadata", []fault{{"rename", tmp, syscall.EXDEV}}, syscall.EXDEV, "", false},
		{"fsync snapshot dir", []fault{{"syncdir", chk5, syscall.EIO}}, syscall.EIO, "", false},
		{"fsync parent dir", []fault{{"syncdir", dir, syscall.EIO}}, syscall.EIO,
			"checkpoint 5: sync " + dir + ": input/output error", false},
		{"fsync dir, then cleanup fails", []fault{{"syncdir", chk5, syscall.EIO}, {"removeall", chk5, syscall.EBUSY}},
			syscall.EIO, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			os.RemoveAll(dir)
			ffs := &faultFS{}
			l, err := NewLocal(dir, withFS(ffs))
			if err != nil {
				t.Fatal(err)
			}
			for id := int64(1); id <= 4; id++ {
				mustSave(t, l, snap(id, Checkpoint))
			}
			ffs.arm(tt.faults...)
			_, err = l.Save(ctx, snap(5, Checkpoint))
			if err == nil {
				t.Fatal("Save: got nil error, want one")
			}
			t.Logf("Save: %v", err)
			if left := ffs.unfired(); len(left) > 0 {
				t.Fatalf("faults never fired: %v", left)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Save: got %v, want it to wrap %v", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "checkpoint 5: ") || !strings.Contains(err.Error(), dir) {
				t.Errorf("Save: got %q, want it to start with %q and name a path", err, "checkpoint 5: ")
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("Save: got %q, want %q", err, tt.msg)
			}

			if got, want := ids(mustList(t, l)), []int64{2, 3, 4}; !slices.Equal(got, want) {
				t.Errorf("List: got %v, want %v", got, want)
			}
			if _, err := os.Lstat(filepath.Join(chk5, metadataFileName)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("_metadata of the failed save: got %v, want it absent", err)
			}
			if _, err := os.Lstat(chk5); tt.left != (err == nil) {
				t.Errorf("failed save's directory: stat error %v, want left behind %t", err, tt.left)
			}
			if s, info, err := l.Latest(ctx); err != nil || s.ID != 4 || info.Warning != nil {
				t.Errorf("Latest: got %v, warning %v, err %v; want 4", s, info.Warning, err)
			}

			// The next attempt succeeds and cleans up.
			mustSave(t, l, snap(5, Checkpoint))
			if got, want := ids(mustList(t, l)), []int64{3, 4, 5}; !slices.Equal(got, want) {
				t.Errorf("List after retry: got %v, want %v", got, want)
			}
		})
	}
}

func TestFailedSaveRealFS(t *testing.T) {
	// Permissions do not stop root, so make the target path a regular file.
	ctx := context.Background()
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, l, snap(1, Checkpoint))
	target := filepath.Join(l.Dir(), "chk-2")
	if err := os.WriteFile(target, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = l.Save(ctx, snap(2, Checkpoint))
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "checkpoint 2: mkdir "+target) {
		t.Errorf("Save: got %v, want a mkdir error naming %s wrapping fs.ErrExist", err, target)
	}
	if got := ids(mustList(t, l)); !slices.Equal(got, []int64{1}) {
		t.Errorf("List: got %v, want [1]", got)
	}

	// SaveSavepoint under a path that is a file.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SaveSavepoint(ctx, filepath.Join(file, "sp"), snap(3, Savepoint)); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("SaveSavepoint under a file: got %v, want ENOTDIR", err)
	}
}

func TestFailedSavepoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ffs := &faultFS{}
	state := filepath.Join(dir, "savepoint-9", stateFileName)
	ffs.arm(fault{"write", state, syscall.ENOSPC})
	_, err := saveSavepoint(ctx, ffs, dir, snap(9, Savepoint))
	if want := "savepoint 9: write " + state + ": no space left on device"; err == nil || err.Error() != want {
		t.Errorf("saveSavepoint: got %v, want %q", err, want)
	}
	if got := dirEntries(t, dir); len(got) != 0 {
		t.Errorf("directory after failed savepoint: got %v, want empty", got)
	}
	if _, err := saveSavepoint(ctx, ffs, dir, snap(9, Savepoint)); err != nil {
		t.Errorf("retry: %v", err)
	}
}

// cancelAfter is a context whose Err reports Canceled after n calls.
type cancelAfter struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *cancelAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

func TestSaveCanceled(t *testing.T) {
	big := &Snapshot{ID: 2, Tasks: make([]TaskState, 1000)}
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			mustSave(t, s, snap(1, Checkpoint))
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := s.Save(ctx, snap(2, Checkpoint)); !errors.Is(err, context.Canceled) {
				t.Errorf("Save with canceled context: got %v, want context.Canceled", err)
			}
			if _, ok := s.(*Local); ok {
				// Canceled in the middle of writing the state file.
				_, err := s.Save(&cancelAfter{Context: context.Background(), n: 5}, big)
				if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "chk-2") {
					t.Errorf("Save canceled midway: got %v, want context.Canceled naming chk-2", err)
				}
			}
			if got := ids(mustList(t, s)); !slices.Equal(got, []int64{1}) {
				t.Errorf("List: got %v, want [1]", got)
			}
		})
	}
}

func TestMemoryDoesNotAlias(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	in := snap(1, Checkpoint)
	mustSave(t, m, in)
	// Mutate everything the caller still holds.
	in.Enumerators["src"][0] = 'X'
	in.Tasks[0].Parts["splits"][0][0] = 'X'
	in.Tasks[0].Parts["new"] = nil
	in.Properties["p"] = "x"
	in.Tasks[1].Vertex = "x"

	got, _, err := m.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, got, snap(1, Checkpoint))
	// Mutate what Latest returned.
	got.Enumerators["src"][0] = 'Y'
	got.Tasks[0].Parts["splits"][1][0] = 'Y'
	again, _, err := m.Get(ctx, Checkpoint, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, again, snap(1, Checkpoint))
}

func TestConcurrentListWhileSave(t *testing.T) {
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			s := st.open(t, Retain(2))
			const saves = 40
			var wg sync.WaitGroup
			done := make(chan struct{})
			errc := make(chan error, 100)
			wg.Go(func() {
				defer close(done)
				for id := int64(1); id <= saves; id++ {
					k := Checkpoint
					if id%10 == 0 {
						k = Savepoint
					}
					if _, err := s.Save(ctx, snap(id, k)); err != nil {
						errc <- fmt.Errorf("Save(%d): %w", id, err)
						return
					}
				}
			})
			for range 3 {
				wg.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						infos, err := s.List(ctx)
						if err != nil {
							errc <- fmt.Errorf("List: %w", err)
							return
						}
						checkpoints := 0
						for i, in := range infos {
							if in.Warning != nil {
								errc <- fmt.Errorf("List entry %d: %w", in.ID, in.Warning)
								return
							}
							if i > 0 && infos[i-1].ID >= in.ID {
								errc <- fmt.Errorf("List not sorted: %v", ids(infos))
								return
							}
							if in.Kind == Checkpoint {
								checkpoints++
							}
						}
						// Retain 2, plus the one just saved before pruning.
						if checkpoints > 3 {
							errc <- fmt.Errorf("List shows %d checkpoints: %v", checkpoints, listed(infos))
							return
						}
					}
				})
			}
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					snap, info, err := s.Latest(ctx)
					if errors.Is(err, ErrNotFound) {
						continue
					}
					if err != nil || info.Warning != nil || snap.ID != info.ID {
						errc <- fmt.Errorf("Latest: %v (warning %v)", err, info.Warning)
						return
					}
				}
			})
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Error(err)
			}
			want := []string{"savepoint-10", "savepoint-20", "savepoint-30", "savepoint-40", "chk-38", "chk-39"}
			slices.SortFunc(want, func(a, b string) int {
				_, x, _ := parseDirName(a)
				_, y, _ := parseDirName(b)
				return int(x - y)
			})
			if got := listed(mustList(t, s)); !slices.Equal(got, want) {
				t.Errorf("final List: got %v, want %v", got, want)
			}
		})
	}
}
