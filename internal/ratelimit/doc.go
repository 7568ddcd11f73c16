// Package ratelimit holds the token bucket and the wake-up timer that
// non-blocking readers use to throttle themselves.
//
// A reader that must not emit faster than some rate asks its [Limiter] how
// many records it may emit now ([Limiter.Take]). When the bucket is empty,
// PollNext returns NothingAvailable and the reader hands the runtime the
// channel of a [Timer] armed for [Limiter.Delay]: it is closed when enough
// tokens have accumulated, and the runtime polls again.
//
// Neither type is safe for concurrent use; each reader owns its own, on its
// subtask's goroutine. The timer's callback only closes a channel.
package ratelimit
