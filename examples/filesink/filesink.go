// Package filesink is an example of a custom exactly-once sink: it writes
// lines into files of one directory, and a file becomes visible only once
// the checkpoint that prepared it completed. It is written against sluice's
// public API only and passes the connector conformance suite (see
// filesink_test.go and docs/connector-howto.md).
//
// A writer streams its lines into ".inprogress-<subtask>". At checkpoint n
// it syncs the file and renames it to ".pending-<n>-<subtask>"; after the
// checkpoint completed, the committer renames that to
// "part-<n>-<subtask>.txt", the committed view. Hidden files are never
// part of it. Names derive from (checkpoint, subtask), so a restarted
// writer finds what an aborted attempt left behind and removes it.
package filesink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

// Committable is a prepared file and the name it is committed under.
type Committable struct {
	Pending string `json:"pending"`
	Final   string `json:"final"`
}

// New returns an exactly-once sink of lines into dir.
func New(dir string) sink.Sink[string] {
	return sink.NewTwoPhase[string, Committable](&fileSink{dir: dir})
}

type fileSink struct {
	dir       string
	noCleanup bool // the suite's self-test: a sink that leaves leftovers
}

func (s *fileSink) CommittableSerializer() serde.Versioned[Committable] {
	return serde.JSON[Committable](1)
}

func (s *fileSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[Committable], error) {
	return &committer{dir: s.dir}, nil
}

// CreateWriter removes what aborted attempts of this subtask left behind:
// files prepared after the restored checkpoint (their checkpoint never
// completed), and the in-progress file. Subtask 0 also cleans up after
// subtasks that no longer exist, after scaling down.
func (s *fileSink) CreateWriter(_ context.Context, ic sink.InitContext) (sink.CommittingWriter[string, Committable], error) {
	sub, par := ic.SubtaskIndex(), ic.Parallelism()
	restored, ok := ic.RestoredCheckpointID()
	if (ic.Attempt() > 0 || ok) && !s.noCleanup {
		entries, err := os.ReadDir(s.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			var id int64
			var owner int
			_, errPending := fmt.Sscanf(e.Name(), ".pending-%d-%d", &id, &owner)
			_, errInProgress := fmt.Sscanf(e.Name(), ".inprogress-%d", &owner)
			stale := (errPending == nil && (!ok || id > restored)) || errInProgress == nil
			if stale && (owner == sub || (sub == 0 && owner >= par)) {
				if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, err
				}
			}
		}
	}
	return &writer{dir: s.dir, sub: sub}, nil
}

// writer is used from its subtask's goroutine only.
type writer struct {
	dir string
	sub int
	f   *os.File
	buf *bufio.Writer
}

func (w *writer) inProgress() string {
	return filepath.Join(w.dir, fmt.Sprintf(".inprogress-%d", w.sub))
}

func (w *writer) Write(ctx context.Context, line string, _ sink.Meta) error {
	if w.f == nil {
		f, err := os.OpenFile(w.inProgress(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		w.f, w.buf = f, bufio.NewWriter(f)
	}
	_, err := w.buf.WriteString(line + "\n")
	return err
}

// Flush does nothing: PrepareCommit makes the file durable.
func (w *writer) Flush(context.Context, bool) error { return nil }

func (w *writer) PrepareCommit(ctx context.Context, id int64) ([]Committable, error) {
	if w.f == nil {
		return nil, nil
	}
	err := errors.Join(w.buf.Flush(), w.f.Sync(), w.f.Close())
	w.f = nil
	if err != nil {
		return nil, err
	}
	c := Committable{Pending: fmt.Sprintf(".pending-%012d-%04d", id, w.sub), Final: fmt.Sprintf("part-%012d-%04d.txt", id, w.sub)}
	if err := os.Rename(w.inProgress(), filepath.Join(w.dir, c.Pending)); err != nil {
		return nil, err
	}
	return []Committable{c}, syncDir(w.dir)
}

// Close drops the in-progress file: unprepared lines never become visible.
func (w *writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return errors.Join(err, os.Remove(w.inProgress()))
}

type committer struct{ dir string }

// Commit renames prepared files to their final names. A committable whose
// final file exists was committed before: that is a success.
func (c *committer) Commit(_ context.Context, reqs []sink.CommitRequest[Committable]) error {
	for _, r := range reqs {
		cm := r.Committable()
		err := os.Rename(filepath.Join(c.dir, cm.Pending), filepath.Join(c.dir, cm.Final))
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(c.dir, cm.Final)); serr == nil {
				r.SignalAlreadyCommitted()
				continue
			}
		}
		if err != nil {
			r.SignalFailedWithUnknownReason(fmt.Errorf("filesink: commit %s of checkpoint %d: %w", cm.Final, r.CheckpointID(), err))
		}
	}
	return syncDir(c.dir)
}

func (c *committer) Close() error { return nil }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// Committed returns the committed files' lines, oldest checkpoint first.
func Committed(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "part-*.txt"))
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, f := range files { // Glob sorts: by checkpoint, then subtask
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	return lines, nil
}
