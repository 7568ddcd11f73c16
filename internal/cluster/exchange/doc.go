// Package exchange carries records between sluice nodes: the network
// counterpart of the engine's in-process exchange (bounded channels of
// record batches), for the edges of a job graph whose producer and
// consumer subtasks run on different nodes.
//
// # Channels and streams
//
// A channel is what one producer subtask sends one consumer subtask over
// one edge ([ChannelID]). Each channel is one bidirectional gRPC stream
// (/sluice.exchange.v1.Exchange/Channel); all channels between two nodes
// share the one HTTP/2 connection of a [Client], which multiplexes them —
// the shape of Flink's one Netty connection per TaskManager pair with
// per-channel credit. A stream per channel keeps each channel's order and
// failure its own and needs no demultiplexing of our own.
//
// The consumer's node runs a [Server]; its task registers a [Receiver]
// with [Listen] for (channel, [Epoch]). The producer's task opens a
// [Sender] with [Open]: a hello frame names the channel and the epoch,
// and the receiver answers with its initial credits. A sender of an older
// epoch than the registered receiver is refused (ErrStaleEpoch), so a
// sender left over from a failed attempt or a restarted region can never
// feed a new one; a sender that arrives before its receiver is registered
// waits up to the accept timeout.
//
// No protobuf and no code generation: gRPC moves frames of bytes through
// a codec registered under the content-subtype "sluice-exchange", so the
// service can share a gRPC server with others.
//
// # Credit-based flow control
//
// As in Flink's credit-based flow control (FLINK-7282), the receiver
// grants credits, one per frame it has room for ([WithCredits], default
// 4); the sender spends one credit per frame and sends nothing without
// one. When the consuming task has taken all of a
// frame's messages, the receiver announces one more credit (announcements
// are coalesced). The sender queues at most [WithSendQueue] encoded
// batches (default 2); SendBatch blocks beyond that. So a stalled
// consumer stops its producer with at most credits + 1 frames on the
// receiving side and send-queue frames on the sending side, and never
// makes HTTP/2 or TCP buffer without bound: gRPC's own per-stream flow
// control is a second, lower limit, not the one we rely on.
//
// # Events in line
//
// Watermarks, barriers (checkpoint ids), idleness and end of partition
// are items of data frames, in order with the records: an event is
// appended to the last queued frame, behind the records sent before it.
// Nothing overtakes anything — checkpoints are aligned, and an unaligned
// barrier that overtakes records is not supported.
//
// Do events need credit? Flink sends an event without credit when it is
// at the head of a subpartition's queue, which keeps the order. Here an
// event rides on the frame already queued (so it costs no credit of its
// own and SendEvent does not block), and only an event with nothing
// queued before it takes a frame — and a credit — alone. Sending it
// without credit would not let it arrive any earlier in the consumer's
// order, and would let a producer of only watermarks overrun a stalled
// consumer; a credit per frame keeps the receiver's memory bounded.
// Consecutive watermarks in a queued frame are coalesced to the last one;
// [WithMaxPendingEvents] bounds the rest.
//
// # Records
//
// Each edge that crosses nodes needs a [Codec] (ErrNoCodec names the
// channel when it is missing); [FromVersioned] adapts a serde.Versioned
// serializer, and package clicodec encodes the CLI's records compactly.
// A frame is one batch: its records, each length-prefixed, are decoded on
// the receiver's stream goroutine, off the consuming task.
//
// # Failures
//
// A broken stream — a lost connection, a peer that aborted or closed,
// a frame that does not decode, a frame sent without credit — ends the
// channel with ErrBroken on both sides: the sender's next call returns
// it, the receiver's Poll returns it after the messages it received. The
// exchange never reconnects: the engine fails the region and its new
// attempt opens new channels with a newer epoch.
//
// # Security
//
// [WithTLSFiles] turns on mutual TLS 1.3 for servers and clients from PEM
// files: a server requires a client certificate signed by the CA and logs
// every peer it refuses.
//
// # Goroutines
//
// A Sender owns two goroutines (one sends frames, one reads credits),
// waited for by Close. A Receiver owns the goroutine that reads its
// stream, waited for by Close; the stream's gRPC handler goroutine
// announces its credits. A Server's goroutines are gRPC's, ended by Stop.
package exchange
