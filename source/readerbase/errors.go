package readerbase

import (
	"errors"
	"fmt"
	"strings"
)

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
	// ErrWakeUp is the cause (context.Cause) of a Fetch ctx that the
	// fetcher cancelled to hand over new splits or a pause, not to stop.
	// A SplitReader whose I/O must not be cut short by a wake-up (it
	// keeps a ctx for later reads, or cannot resume a read cut in the
	// middle) tells the two apart with errors.Is(context.Cause(ctx),
	// ErrWakeUp); see [SplitReader].
	ErrWakeUp = errors.New("readerbase: fetcher woken up to hand over splits")
)

// PanicError is the value PollNext panics with after a SplitReader
// panicked on a fetcher goroutine. The fetcher recovers (so it ends and
// Close still waits for every fetcher) and hands the panic to the task
// goroutine, where PollNext re-raises it, as golang.org/x/sync/errgroup
// re-raises a panic in Wait: a panic in connector code is still a panic
// in the reader, and the runtime turns it into a task failure (wrapping
// stream.ErrPanic) that goes through the restart strategy. Once PollNext
// has panicked, later calls return the PanicError as their error.
type PanicError struct {
	// Fetcher is the fetcher's number, and Splits the splits it held.
	Fetcher int
	Splits  []string
	// In names the method that panicked ("SplitReader" for Fetch,
	// AddSplits or PauseOrResumeSplits; "SplitReader.Close").
	In string
	// Value is the value the SplitReader panicked with.
	Value any
	stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("readerbase: fetcher %d (splits %s): %s panicked: %v", e.Fetcher, strings.Join(e.Splits, ", "), e.In, e.Value)
}

// Unwrap returns Value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Stack returns the fetcher goroutine's stack at the panic.
func (e *PanicError) Stack() []byte { return e.stack }
