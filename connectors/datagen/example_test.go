package datagen_test

import (
	"fmt"

	"github.com/sluice-io/sluice/connectors/datagen"
)

func ExampleNew() {
	src := datagen.New(func(i int64) string { return fmt.Sprintf("order-%d", i) },
		datagen.Count(10), datagen.Splits(3))
	fmt.Println(src.Boundedness())
	for _, sp := range src.InitialSplits() {
		fmt.Printf("%s: indexes [%d, %d)\n", sp.SplitID(), sp.Next, sp.End)
	}
	fmt.Println("index 7 is in split", src.SplitOf(7))

	endless := datagen.New(func(i int64) int64 { return i }, datagen.Splits(3))
	fmt.Println(endless.Boundedness(), "- index 7 is in split", endless.SplitOf(7))
	// Output:
	// bounded
	// split-0: indexes [0, 4)
	// split-1: indexes [4, 7)
	// split-2: indexes [7, 10)
	// index 7 is in split 2
	// unbounded - index 7 is in split 1
}
