package engine_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/watermark"
)

// Building a graph by hand; package stream does this for you.
func ExampleNewJob() {
	g := engine.NewGraph()
	src := engine.SourceNode(g, "numbers", datagen.New(func(i int64) int64 { return i }, datagen.Count(3)), watermark.None[int64]())
	sq := engine.MapNode(g, "square", func(v int64) int64 { return v * v })
	out := engine.SinkNode(g, "print", print.New[int64](print.To(os.Stdout)))
	g.Connect(src, sq, engine.Forward, false, nil)
	g.Connect(sq, out, engine.Forward, false, nil)
	job, err := engine.NewJob("squares", g, engine.Config{Logger: engine.DiscardLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := job.Run(context.Background())
	fmt.Println(res.State, res.Checkpoints.Completed, err)
	// Output:
	// 0
	// 1
	// 4
	// FINISHED 1 <nil>
}
