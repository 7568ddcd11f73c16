package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

// Two nodes in one process: the consumer's node serves, its task
// registers a receiver; the producer's task opens the channel and sends a
// batch, a watermark and a checkpoint barrier, in line.
func Example() {
	ctx := context.Background()
	srv, err := exchange.NewServer()
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()

	ch := exchange.ChannelID{Job: "orders", Edge: "parse->enrich", Src: 0, Dst: 1}
	ep := exchange.Epoch{Attempt: 1, Generation: 0}
	codec := exchange.BytesCodec{}
	recv, err := exchange.Listen(srv, ch, ep, codec, exchange.WithCredits(4))
	if err != nil {
		panic(err)
	}
	defer recv.Close()

	client, err := exchange.Dial(lis.Addr().String())
	if err != nil {
		panic(err)
	}
	defer client.Close()
	send, err := exchange.Open(ctx, client, ch, ep, codec)
	if err != nil {
		panic(err)
	}
	_ = send.SendBatch(ctx, [][]byte{[]byte("a"), []byte("b")})
	_ = send.SendEvent(ctx, exchange.Watermark(1000))
	_ = send.SendEvent(ctx, exchange.Barrier(7))
	if err := send.Close(ctx); err != nil {
		panic(err)
	}

	for {
		m, err := recv.Next(ctx)
		if errors.Is(err, exchange.ErrEndOfStream) {
			fmt.Println("end of stream")
			return
		}
		if err != nil {
			panic(err)
		}
		if m.Kind == exchange.KindRecords {
			fmt.Printf("records %q\n", m.Records)
		} else {
			fmt.Println(m.Kind, m.Value)
		}
	}
	// Output:
	// records ["a" "b"]
	// watermark 1000
	// barrier 7
	// end of stream
}
