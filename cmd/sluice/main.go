// Command sluice runs declarative exactly-once pipelines: `sluice run
// pipeline.yaml`, `sluice demo`, `sluice checkpoints DIR`, `sluice
// connectors`, `sluice version`. See docs/cli.md.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-io/sluice/internal/cli"
)

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	app := &cli.App{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.LookupEnv, Signals: sigs}
	os.Exit(app.Main(os.Args[1:]))
}
