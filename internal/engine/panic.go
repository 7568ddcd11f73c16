package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// ErrPanic is wrapped by the error that fails a task or the job when
// connector or user code panicked: a map function, a reader, a writer, a
// committer, a global committer, an enumerator or one of its async calls,
// a fetcher of source/readerbase. The error names the operator and subtask
// and carries the panic value (wrapped, if it is an error); the stack is
// logged with the value, not put into the error. The failure goes through
// the restart strategy like any other.
var ErrPanic = errors.New("panic")

// panicStacker is implemented by a panic value that was recovered on
// another goroutine and re-raised (readerbase.PanicError): its stack is
// the one worth logging.
type panicStacker interface{ Stack() []byte }

// panicError turns a value recovered from a panic in where (a method name,
// or "" when unknown) into an error wrapping ErrPanic, and logs the value
// with the stack of the panicking goroutine. It must be called from the
// deferred function that recovered, so that the stack still shows the
// panic.
func panicError(log *slog.Logger, where string, r any) error {
	stack := debug.Stack()
	if s, ok := r.(panicStacker); ok {
		stack = s.Stack()
	}
	in := ""
	if where != "" {
		in = " in " + where
	}
	log.Error("recovered from a panic"+in+"; failing the task", "panic", fmt.Sprint(r), "stack", string(stack))
	if err, ok := r.(error); ok {
		return fmt.Errorf("%w%s: %w", ErrPanic, in, err)
	}
	return fmt.Errorf("%w%s: %v", ErrPanic, in, r)
}

// recoverTo is deferred by calls into connector or user code that return
// an error: a panic becomes that error (see panicError).
//
//	defer recoverTo(&err, log, "Committer.Commit")
func recoverTo(err *error, log *slog.Logger, where string) {
	if r := recover(); r != nil {
		*err = panicError(log, where, r)
	}
}

// callSafely runs fn, turning a panic into an error (see panicError).
func callSafely(log *slog.Logger, where string, fn func() error) (err error) {
	defer recoverTo(&err, log, where)
	return fn()
}
