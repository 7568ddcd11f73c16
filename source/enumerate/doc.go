// Package enumerate is the enumerator half of sluice's source connector
// kit: ready-made [source.Enumerator]s, so that a connector supplies only
// its splits (or a function that finds them) and its reader.
//
//   - [Fixed] hands out a set of splits known at start.
//   - [Discovered] runs a discovery function periodically (or once, for a
//     bounded source) and hands out the splits it has not seen before.
//
// Both assign by pull (a reader asks; the default) or push ([Push] with an
// owner function, [RoundRobin]). Pair the assignment with the reader: a
// reader built with readerbase asks for splits only when it is given
// readerbase.PullSplits(), so under pull assignment without that option no
// split is ever handed out and a bounded job never ends; use [RoundRobin]
// or [Push] with readerbase's default. Both signal no-more-splits to the
// readers of a bounded source once everything is handed out, take splits
// back with AddSplitsBack and assign them again, and serve a reader that
// registers again after a regional restart afresh (its splits again, and
// no-more-splits again once nothing is left for it), as the
// [source.Enumerator.AddReader] contract asks. Their checkpoint state is
// the unassigned splits (and, for Discovered, what discovery has seen).
//
// A connector returns one from CreateEnumerator and RestoreEnumerator:
//
//	func (s *Source) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, []Split], error) {
//		return enumerate.NewFixed(ctx, s.splits(), source.Bounded), nil
//	}
//	func (s *Source) RestoreEnumerator(ctx source.EnumeratorContext[Split], st []Split) (source.Enumerator[Split, []Split], error) {
//		return enumerate.NewFixed(ctx, st, source.Bounded), nil
//	}
//
// A connector with a checkpoint format of its own embeds the enumerator in
// a struct and defines SnapshotState around Unassigned (Fixed) or the
// [DiscoveredState] (Discovered).
//
// Like every enumerator, these run on the coordinator goroutine and never
// block; only [Discovery.Discover] runs elsewhere, through
// [source.EnumeratorContext.CallAsync]. The package uses the standard
// library only.
package enumerate
