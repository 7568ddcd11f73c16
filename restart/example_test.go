package restart_test

import (
	"fmt"
	"time"

	"github.com/sluice-io/sluice/restart"
)

func ExampleExponential() {
	s := restart.Exponential(100*time.Millisecond, time.Second, 5)
	for attempt := 1; attempt <= 6; attempt++ {
		d, ok := s.Next(attempt)
		fmt.Println(attempt, d, ok)
	}
	// Output:
	// 1 100ms true
	// 2 200ms true
	// 3 400ms true
	// 4 800ms true
	// 5 1s true
	// 6 0s false
}
