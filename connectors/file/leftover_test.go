package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-io/sluice/connectortest/fakes"
)

// TestSinkCounterAboveOthersFiles restores writer 1 of 2 after a rescale
// without a state of its own subtask, while a hidden file of subtask 1
// (.part-<job>-1-5) belongs to another writer (it resumed it from old
// subtask 1's state) and the finished files 1-0…1-4 were taken away by a
// consumer. The writer's new files must be numbered above 5: if it
// started at the free counter 0, its next checkpoint would store
// NextCounter 1, and a restore from it would remove 1-5 as a stray of
// subtask 1 — an open or prepared file of the other writer, lost.
func TestSinkCounterAboveOthersFiles(t *testing.T) {
	dir := t.TempDir()
	names := partNames{prefix: "part", job: testJob}
	other := inProgress(names.final(1, 5))
	if err := os.WriteFile(filepath.Join(dir, other), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, dir)
	w, err := s.newWriter(&fakes.InitContext{Subtask: 1, Parallel: 2, AttemptNum: 1, Restored: 4, HasRestored: true},
		[]writerState{{JobID: testJob, Subtask: 2, Parallelism: 3, NextCounter: 0}})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "a")
	if w.next <= 5 {
		t.Errorf("next counter %d after the first file, want above 5 (the other writer's %s)", w.next, other)
	}
	var open []inProgressFile
	for _, b := range w.buckets {
		if b.part != nil {
			open = append(open, inProgressFile{Bucket: b.name, Temp: b.part.out.temp(), Final: b.part.final, Size: 0})
		}
	}
	next := w.next
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The same parallelism again: writer 1 gets its own state back.
	w, err = s.newWriter(&fakes.InitContext{Subtask: 1, Parallel: 2, AttemptNum: 2, Restored: 5, HasRestored: true},
		[]writerState{{JobID: testJob, Subtask: 1, Parallelism: 2, NextCounter: next, InProgress: open}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(filepath.Join(dir, other)); err != nil {
		t.Fatalf("the other writer's %s: %v", other, err)
	}
}

// TestSinkRegionRestartKeepsLiveWritersFiles restores a scale-down from 4
// to 2 in which old subtask 1's state reached writer 0: built together
// (one attempt), writer 0 removes old subtask 1's stray; then writer 1
// writes a new file under its name, and writer 0's region restarts alone
// (a new attempt) from the same checkpoint, with the same states: writer
// 0 must leave writer 1's open file alone.
func TestSinkRegionRestartKeepsLiveWritersFiles(t *testing.T) {
	dir := t.TempDir()
	names := partNames{prefix: "part", job: testJob}
	for c := range int64(5) { // committed by the old run
		if err := os.WriteFile(filepath.Join(dir, names.final(1, c)), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stray := inProgress(names.final(1, 6))
	if err := os.WriteFile(filepath.Join(dir, stray), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, dir)
	restored := func(sub, attempt int, st ...writerState) *writer[string] {
		t.Helper()
		w, err := s.newWriter(&fakes.InitContext{Subtask: sub, Parallel: 2, AttemptNum: attempt, Restored: 4, HasRestored: true}, st)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	of0 := writerState{JobID: testJob, Subtask: 0, Parallelism: 4, NextCounter: 3}
	of1 := writerState{JobID: testJob, Subtask: 1, Parallelism: 4, NextCounter: 5}
	w1 := restored(1, 1, of0)
	defer w1.Close()
	w0 := restored(0, 1, of1)
	if _, err := os.Stat(filepath.Join(dir, stray)); !os.IsNotExist(err) {
		t.Fatalf("old subtask 1's stray %s: %v, want it removed", stray, err)
	}
	writeAll(t, w1, "a")
	var open string
	for _, b := range w1.buckets {
		if b.part != nil {
			open = b.part.out.temp()
		}
	}
	if err := w0.Close(); err != nil {
		t.Fatal(err)
	}
	w0 = restored(0, 2, of1)
	defer w0.Close()
	if _, err := os.Stat(filepath.Join(dir, open)); err != nil {
		t.Fatalf("writer 1's open file %s after writer 0's region restarted: %v", open, err)
	}
}
