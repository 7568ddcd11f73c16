package exchange

import "errors"

var (
	// ErrNoCodec: an edge that crosses nodes has no record codec. Records
	// that leave a process must be encoded; set one for the edge.
	ErrNoCodec = errors.New("exchange: no record codec for an edge that crosses nodes")
	// ErrStaleEpoch: a sender or receiver of an older attempt or
	// generation than the channel's current one was refused.
	ErrStaleEpoch = errors.New("exchange: stale attempt/generation")
	// ErrSuperseded: a receiver was replaced by one of a newer epoch.
	ErrSuperseded = errors.New("exchange: receiver superseded by a newer epoch")
	// ErrBroken: the stream of a channel broke (connection lost, peer
	// aborted, protocol violation). The engine fails the region; a new
	// attempt opens new channels.
	ErrBroken = errors.New("exchange: channel broken")
	// ErrEndOfStream: the sender closed the channel; everything it sent
	// was delivered before this error.
	ErrEndOfStream = errors.New("exchange: end of stream")
	// ErrClosed: the sender, receiver or server was closed locally.
	ErrClosed = errors.New("exchange: closed")
	// ErrRefused: the receiving node refused the channel (no receiver
	// registered in time, a sender already attached, or a stale epoch).
	ErrRefused = errors.New("exchange: channel refused")
)
