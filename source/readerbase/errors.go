package readerbase

import "errors"

// Sentinel errors. Returned errors wrap them with details; test with
// errors.Is.
var (
	// ErrInvalidConfig is returned by New for a missing Config field or a
	// bad option.
	ErrInvalidConfig = errors.New("readerbase: invalid config")
	// ErrNotStarted is returned by AddSplits before Start.
	ErrNotStarted = errors.New("readerbase: reader not started")
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("readerbase: reader closed")
	// ErrDuplicateSplit is returned by AddSplits for a split the reader
	// already holds.
	ErrDuplicateSplit = errors.New("readerbase: split already assigned")
	// ErrSplitsAfterNoMoreSplits is returned by AddSplits after
	// NotifyNoMoreSplits.
	ErrSplitsAfterNoMoreSplits = errors.New("readerbase: splits added after NotifyNoMoreSplits")
	// ErrUnknownSplit is returned by PollNext when a SplitReader returned
	// records for, or finished, a split the reader does not hold.
	ErrUnknownSplit = errors.New("readerbase: batch names a split the reader does not hold")
)
