package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Kind tells a checkpoint from a savepoint.
type Kind int

const (
	// Checkpoint is a snapshot taken by the runtime. Storage retention
	// prunes old checkpoints; Latest considers only checkpoints.
	Checkpoint Kind = iota
	// Savepoint is a snapshot the user asked for. It is never pruned.
	Savepoint
)

// String returns "checkpoint" or "savepoint".
func (k Kind) String() string {
	switch k {
	case Checkpoint:
		return "checkpoint"
	case Savepoint:
		return "savepoint"
	default:
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// MarshalText implements [encoding.TextMarshaler].
func (k Kind) MarshalText() ([]byte, error) {
	if !k.valid() {
		return nil, fmt.Errorf("checkpoint: invalid kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler]. It accepts the
// strings String returns.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "checkpoint":
		*k = Checkpoint
	case "savepoint":
		*k = Savepoint
	default:
		return fmt.Errorf("checkpoint: invalid kind %q (want checkpoint or savepoint)", b)
	}
	return nil
}

func (k Kind) valid() bool { return k == Checkpoint || k == Savepoint }

// dirPrefix is the prefix of the directory name of a snapshot of kind k.
func (k Kind) dirPrefix() string {
	if k == Savepoint {
		return "savepoint-"
	}
	return "chk-"
}

// Snapshot is everything a completed checkpoint holds.
//
// A snapshot survives a Save/Load round trip exactly: nil and empty maps,
// slices and blobs are told apart, so reflect.DeepEqual holds for everything
// but Timestamp, which is stored with nanosecond precision and loaded in UTC
// (compare it with time.Time.Equal).
type Snapshot struct {
	// ID is the checkpoint id. Checkpoints and savepoints of one job share
	// the id sequence. It must not be negative.
	ID int64
	// Kind is Checkpoint (the zero value) or Savepoint.
	Kind Kind
	// JobName names the job that took the snapshot.
	JobName string
	// Timestamp is when the snapshot was taken. If it is zero, Save stores
	// the current time.
	Timestamp time.Time
	// Enumerators holds each source's serialized enumerator state, by source vertex id.
	Enumerators map[string][]byte
	// Tasks holds the state of every subtask.
	Tasks []TaskState
	// Properties is free-form metadata (e.g. "parallelism/<vertex>" = "4").
	Properties map[string]string
}

// TaskState is the state of one subtask.
type TaskState struct {
	Vertex      string
	Subtask     int
	Parallelism int
	// Parts holds named lists of serialized blobs: "splits", "writer", "committables/<checkpointID>", ...
	Parts map[string][][]byte
}

// Info describes a stored snapshot without loading its state.
type Info struct {
	ID        int64
	Kind      Kind
	JobName   string
	Timestamp time.Time
	// Path is the snapshot's directory (absolute). It is empty for Memory.
	Path string
	// Size is the size of the snapshot's state in bytes (the state file;
	// for Memory, the size the state file would have).
	Size int64
	// Warning, when not nil, reports problems that did not make the call
	// fail. Every error in it names the path it is about.
	//
	//   - Latest: never set (Latest fails rather than skip a checkpoint).
	//   - Save: checkpoints that retention or garbage collection failed to
	//     remove. The snapshot itself is saved.
	//   - List and ListDir: the entry's _metadata could not be read; only ID,
	//     Kind and Path (taken from the directory name) are set.
	Warning error
}

// Storage stores snapshots.
//
// Implementations in this package are safe for concurrent use.
type Storage interface {
	// Save persists s atomically: either it is fully there and listed afterwards, or not at all.
	Save(ctx context.Context, s *Snapshot) (Info, error)
	// Latest loads the newest complete checkpoint (savepoints are not
	// considered), or returns ErrNotFound; it fails (ErrDamaged) rather
	// than fall back past a completed checkpoint it cannot load.
	Latest(ctx context.Context) (*Snapshot, Info, error)
	// List lists complete snapshots, oldest first.
	List(ctx context.Context) ([]Info, error)
	// Discard removes a snapshot.
	Discard(ctx context.Context, id int64) error
}

var (
	// ErrNotFound is returned (wrapped) when there is no snapshot to load or
	// discard, or when a directory holds no _metadata.
	ErrNotFound = errors.New("snapshot not found")
	// ErrCorrupt is wrapped by errors about snapshots that fail verification:
	// a CRC-32C or size mismatch, a malformed state or metadata file, a
	// missing state file or an unsupported format version.
	ErrCorrupt = errors.New("corrupt snapshot")
	// ErrUnsupportedVersion is wrapped, together with ErrCorrupt, when a
	// snapshot was written in a format version this build cannot read.
	ErrUnsupportedVersion = errors.New("unsupported format version")
	// ErrExists is returned (wrapped) by Save when a complete snapshot of the
	// same kind and ID is already stored.
	ErrExists = errors.New("snapshot already exists")
)

// DefaultRetain is how many checkpoints a storage keeps unless Retain says otherwise.
const DefaultRetain = 3

// Option configures NewLocal and NewMemory.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	retain int
	fs     fileSystem
}

func newOptions(opts []Option) options {
	o := options{retain: DefaultRetain, fs: osFS{}}
	for _, opt := range opts {
		opt.apply(&o)
	}
	return o
}

// Retain keeps the newest n checkpoints (default 3); older ones are removed
// after each successful Save of a checkpoint. Savepoints are never pruned by
// retention. n <= 0 keeps every checkpoint.
func Retain(n int) Option {
	return optionFunc(func(o *options) { o.retain = n })
}

// withFS replaces the file system Local writes through (tests inject faults).
func withFS(f fileSystem) Option {
	return optionFunc(func(o *options) { o.fs = f })
}

// validate checks what Save needs of a snapshot.
func validate(s *Snapshot) error {
	if s == nil {
		return errors.New("checkpoint: save: nil snapshot")
	}
	if !s.Kind.valid() {
		return fmt.Errorf("checkpoint: save: snapshot %d has invalid kind %d", s.ID, int(s.Kind))
	}
	if s.ID < 0 {
		return fmt.Errorf("%s %d: save: negative id", s.Kind, s.ID)
	}
	if y := s.Timestamp.UTC().Year(); y < 0 || y > 9999 {
		// _metadata stores RFC 3339 timestamps, which have four-digit years.
		return fmt.Errorf("%s %d: save: timestamp %v outside years 0 to 9999", s.Kind, s.ID, s.Timestamp)
	}
	return nil
}

// normalizeTime returns the timestamp a saved snapshot carries: now if t is
// zero, in UTC and without a monotonic clock reading.
func normalizeTime(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC()
}
