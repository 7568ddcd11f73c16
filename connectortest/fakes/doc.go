// Package fakes holds small hand-written stand-ins for the runtime's side of
// the source and sink APIs, for unit tests of connectors and wrappers:
// [ReaderContext], [EnumeratorContext], [Output], [Discard] and
// [InitContext].
//
// The fakes record what they were told and never block. Like the runtime
// objects they replace, they are meant for one goroutine (the subtask's or
// the coordinator's), except that their metric registries are safe for
// concurrent use.
package fakes
