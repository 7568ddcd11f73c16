package serde_test

import (
	"fmt"

	"github.com/sluice-io/sluice/serde"
)

type position struct {
	File   string
	Offset int64
}

func ExampleMarshal() {
	s := serde.JSON[position](1)
	b, err := serde.Marshal(s, position{File: "a.txt", Offset: 42})
	if err != nil {
		panic(err)
	}
	p, err := serde.Unmarshal(s, b)
	fmt.Println(p, err)
	// Output: {a.txt 42} <nil>
}
