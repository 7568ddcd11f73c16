package hybrid

import (
	"fmt"

	"github.com/sluice-io/sluice/source"
)

// The hybrid's own source events. Every event between the hybrid's
// enumerator and its readers carries the index of the source it belongs
// to, so that neither side mistakes a late message of one source for one
// of the next.

// readerStartedEvent (reader → enumerator) is a reader's first message: it
// lists the sources it holds restored splits of, in increasing order. The
// enumerator answers with the source to switch to: the earliest of those
// that is before the current source (the enumerator may have moved on
// without this reader, after a regional restart), else the current one.
// (Flink's reader sends a SourceReaderFinishedEvent for the source before
// its first restored split instead, which cannot tell "restored splits of
// source 0" from "none".)
type readerStartedEvent struct{ Restored []int }

func (e readerStartedEvent) String() string {
	return fmt.Sprintf("hybrid.readerStarted(restored sources %v)", e.Restored)
}

// readerFinishedEvent (reader → enumerator) says that the reader has read
// source Source to its end (Flink's SourceReaderFinishedEvent). A reader
// sends it once per source it is switched to.
type readerFinishedEvent struct{ Source int }

func (e readerFinishedEvent) String() string {
	return fmt.Sprintf("hybrid.readerFinished(source %d)", e.Source)
}

// switchEvent (enumerator → reader) makes the reader close its current
// source reader and create one for source Source from child (Flink's
// SwitchSourceEvent, which carries the source too). Final says it is the
// last source: its end is the hybrid reader's end.
type switchEvent struct {
	Source int
	child  child
	Final  bool
}

func (e switchEvent) String() string {
	return fmt.Sprintf("hybrid.switch(source %d, final %v)", e.Source, e.Final)
}

// noMoreSplitsEvent (enumerator → reader) is SignalNoMoreSplits of the
// enumerator of source Source.
type noMoreSplitsEvent struct{ Source int }

func (e noMoreSplitsEvent) String() string {
	return fmt.Sprintf("hybrid.noMoreSplits(source %d)", e.Source)
}

// enumeratorEvent (enumerator → reader) and readerEvent (reader →
// enumerator) carry the sources' own events.
type enumeratorEvent struct {
	Source int
	Event  source.Event
}

func (e enumeratorEvent) String() string {
	return fmt.Sprintf("hybrid.enumeratorEvent(source %d, %v)", e.Source, e.Event)
}

type readerEvent struct {
	Source int
	Event  source.Event
}

func (e readerEvent) String() string {
	return fmt.Sprintf("hybrid.readerEvent(source %d, %v)", e.Source, e.Event)
}
