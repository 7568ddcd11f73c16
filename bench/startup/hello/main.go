// Command hello is the floor of the start-up benchmark (bench/startup): the
// smallest Go program that writes a line, so that a measurement of sluice
// can be read against what any Go binary costs on the same machine.
package main

import "os"

func main() {
	if _, err := os.Stdout.WriteString("hello, world\n"); err != nil {
		os.Exit(1)
	}
}
