// Package hybrid chains sources: a [Source] reads its first source to the
// end, then the next, and so on — typically a bounded backlog (files)
// followed by an unbounded stream (Kafka) that starts where the backlog
// ended. It is sluice's form of Flink's HybridSource (FLIP-150), built on
// the public Source API only.
//
//	src, err := hybrid.New(hybrid.Of(files)).
//		AddSourceFactory(func(sc hybrid.SwitchContext) (hybrid.Child[Event], error) {
//			// Start Kafka at the timestamp the file enumerator ended at.
//			...
//		}, source.ContinuousUnbounded).
//		Build()
//
// Every source but the last must be bounded; the hybrid's boundedness is
// the last one's. A source is added with a fixed start position
// ([Builder.AddSource]) or made at the switch by a [Factory]
// ([Builder.AddSourceFactory]), which gets the previous source's enumerator
// through [SwitchContext.PreviousEnumerator] so that it can hand a position
// over.
//
// # Types
//
// Each source has its own split and enumerator-state types, so [Of] hides
// them behind a [Child]. A hybrid [Split] is (source index, wrapped split
// serialized with its source's versioned serializer); the [EnumState] is
// (current source index, its enumerator's serialized state). Both have
// versioned serializers of their own (version 1, a compact binary form).
//
// # The switch
//
// The hybrid's enumerator runs the enumerator of the current source; a
// hybrid reader runs the reader of the source it was switched to. Every
// message between them carries a source index:
//
//  1. A reader announces itself on its first poll, listing the sources it
//     holds restored splits of; the enumerator answers with a switch to the
//     current source (Flink's SwitchSourceEvent, which carries the source
//     object, so factory-made sources reach the readers) and registers the
//     reader with the current enumerator. A source's enumerator sees only
//     the readers switched to it.
//  2. The current enumerator's splits reach the reader tagged with the
//     source; its no-more-splits signal and its events travel as hybrid
//     events tagged likewise, so a reader never mistakes a message for one
//     of another source. Messages for a source the reader has not been
//     switched to yet are kept until the switch; messages of an earlier
//     source are dropped.
//  3. When a reader's source reader reaches its end, the reader reports it
//     (Flink's SourceReaderFinishedEvent) and waits. Once every reader —
//     those that never got a split too — has finished the current source
//     (a reader that is down, not registered, has not), the enumerator
//     closes the current enumerator, makes the next one (a factory gets the
//     closed previous enumerator) and switches every reader to it. The last
//     source's end is the hybrid reader's end.
//
// # Checkpoints
//
// A checkpoint holds the current source index with its enumerator's state,
// and every reader's splits, each tagged with its source. Checkpoints
// taken before, during and after a switch restore exactly: a reader
// snapshots the splits of its current source plus any restored splits it
// holds for a source it has not been switched to yet (Flink's reader loses
// those if a checkpoint comes before the switch event), and after a restore
// every reader announces itself again, so the enumerator rebuilds which
// reader is where. On restore a factory is called again with a nil
// previous enumerator: the position is in the restored state.
//
// A reader that restarts alone (regional failover) finds the enumerator
// where it is; splits assigned to it since its checkpoint come back
// (AddSplitsBack). Splits of the current source go to its enumerator;
// splits of a source already finished are kept (and checkpointed) until the
// reader announces itself, like the restored splits it holds of such a
// source. The enumerator then switches it to each of those earlier sources
// first, hands it the splits and no-more-splits, and moves it on to the
// current one once it has read them (Flink's pending splits). So "every
// reader finishes a source before any reads the next" holds across global
// restores, but a reader restarted alone may read an earlier source while
// the others read the current one; either way every record is read once.
//
// Sources' own events pass through both ways. A reader implements
// source.SplitPauser by passing the call to the current source reader,
// which fails with errors.ErrUnsupported if that reader cannot pause.
// Events are passed by value in-process; a switch event carries a Go
// value (the source) and cannot cross a process boundary as is.
package hybrid
