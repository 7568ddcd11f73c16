// Command sluiceprof is the sluice command with pprof profiles, for the
// Kafka benchmark's profile runs (the sluice binary has no profile flag):
// SLUICE_CPUPROFILE=FILE writes a CPU profile of the whole run,
// SLUICE_MEMPROFILE=FILE an allocation profile at its end, SLUICE_TRACE=FILE
// an execution trace of the run (go tool trace FILE: where start-up waits,
// goroutine by goroutine). Without them it is the sluice command itself
// (same cli.App).
//
//	go build -o /tmp/sluiceprof ./bench/kafka/sluiceprof
//	SLUICE_CPUPROFILE=/tmp/cpu.pprof /tmp/sluiceprof run pipeline.yaml
//	go tool pprof -top /tmp/sluiceprof /tmp/cpu.pprof
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/sluice-io/sluice/internal/cli"
)

func main() { os.Exit(run()) }

func run() int {
	if path := os.Getenv("SLUICE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluiceprof:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "sluiceprof:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("SLUICE_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluiceprof:", err)
			return 1
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "sluiceprof:", err)
			return 1
		}
		defer trace.Stop()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	app := &cli.App{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.LookupEnv, Signals: sigs}
	code := app.Main(os.Args[1:])
	if path := os.Getenv("SLUICE_MEMPROFILE"); path != "" {
		if err := writeAllocs(path); err != nil {
			fmt.Fprintln(os.Stderr, "sluiceprof:", err)
		}
	}
	return code
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
