package filesink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

// New returns an exactly-once sink of lines into the directory dir.
func New(dir string) sink.Sink[string] { return sink.NewTwoPhase[string, string](&fileSink{dir}) }

type fileSink struct{ dir string } // also its own committer

func (s *fileSink) CommittableSerializer() serde.Versioned[string] { return serde.JSON[string](1) }
func (s *fileSink) Close() error                                   { return nil }
func (s *fileSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[string], error) {
	return s, nil
}

// CreateWriter removes what aborted attempts prepared after the restored checkpoint;
// subtask 0 also for the subtasks that a scale-down removed.
func (s *fileSink) CreateWriter(_ context.Context, ic sink.InitContext) (sink.CommittingWriter[string, string], error) {
	w := &writer{fileSink: s, sub: int64(ic.SubtaskIndex())}
	restored, _ := ic.RestoredCheckpointID()
	prepared, err := filepath.Glob(filepath.Join(s.dir, ".part-*"))
	for _, p := range prepared {
		var id, sub int64
		_, _ = fmt.Sscanf(filepath.Base(p), ".part-%d-%d.txt", &id, &sub)
		if id > restored && (sub == w.sub || (w.sub == 0 && sub >= int64(ic.Parallelism()))) {
			err = errors.Join(err, os.Remove(p))
		}
	}
	return w, err
}

type writer struct {
	*fileSink // dir, and Close: unprepared lines are dropped
	sub       int64
	buf       []byte
}

func (w *writer) Write(_ context.Context, line string, _ sink.Meta) error {
	w.buf = append(append(w.buf, line...), '\n')
	return nil
}
func (w *writer) Flush(context.Context, bool) error { return nil }

// PrepareCommit writes the lines into a hidden file, the committable.
func (w *writer) PrepareCommit(_ context.Context, id int64) (names []string, err error) {
	if len(w.buf) > 0 {
		name := filepath.Join(w.dir, fmt.Sprintf(".part-%012d-%04d.txt", id, w.sub))
		err = errors.Join(os.WriteFile(name, w.buf, 0o644), syncPath(name), syncPath(w.dir))
		w.buf, names = w.buf[:0], []string{filepath.Base(name)}
	}
	return names, err
}

// Commit drops the dot; a file renamed before (restored) is left alone: committed.
func (s *fileSink) Commit(_ context.Context, reqs []sink.CommitRequest[string]) error {
	for _, r := range reqs {
		err := os.Rename(filepath.Join(s.dir, r.Committable()), filepath.Join(s.dir, r.Committable()[1:]))
		if _, serr := os.Stat(filepath.Join(s.dir, r.Committable()[1:])); serr != nil {
			r.SignalFailedWithUnknownReason(errors.Join(err, serr))
		}
	}
	return syncPath(s.dir)
}

func syncPath(p string) error { // fsync a file, or a directory after a rename
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
