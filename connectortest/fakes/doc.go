// Package fakes holds small hand-written stand-ins for the runtime's side of
// the source and sink APIs, for unit tests of connectors and wrappers, as
// testing/fstest does for file systems: [ReaderContext],
// [EnumeratorContext], [Output], [Discard] and [InitContext]. With them a
// test drives a source.SplitReader, a source.Enumerator or a sink.Writer by
// hand, without a job; the conformance suite in package connectortest runs
// connectors through real jobs.
//
// The fakes record what they were told and never block. Like the runtime
// objects they replace, they are meant for one goroutine (the subtask's or
// the coordinator's), except that their metric registries are safe for
// concurrent use. Their zero values are ready to use: subtask 0 of 1, first
// attempt, not restored.
//
// The package depends only on the standard library and sluice's public API
// packages.
package fakes
