// Package cli implements the sluice command: run a YAML pipeline, the
// embedded demo, list connectors and checkpoints, print the version.
// cmd/sluice only wires the process (arguments, signals, exit code) to
// App.Main.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/sluice-io/sluice/internal/cli.Version=v1.2.3".
var Version = "dev"

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1 // the job failed, or a command failed
	ExitUsage  = 2 // bad arguments or an invalid pipeline
)

// App is the sluice command with its environment.
type App struct {
	Stdout, Stderr io.Writer
	// Getenv resolves ${VAR} in pipelines (os.LookupEnv by default).
	Getenv pipeline.Lookup
	// Signals delivers SIGINT/SIGTERM: the first stops the job with a final
	// checkpoint, the second cancels it. May be nil.
	Signals <-chan os.Signal
	// Registry holds the connectors (registry.Default() by default).
	Registry *registry.Registry
	// Terminal forces terminal (true) or plain (false) progress; nil
	// detects it from Stderr.
	Terminal *bool

	// redact hides values from the environment in what a run writes (set
	// by redacted once the pipeline is loaded; nil = nothing to hide).
	redact *pipeline.Redactor
}

func (a *App) defaults() {
	if a.Stdout == nil {
		a.Stdout = os.Stdout
	}
	if a.Stderr == nil {
		a.Stderr = os.Stderr
	}
	if a.Getenv == nil {
		a.Getenv = os.LookupEnv
	}
	if a.Registry == nil {
		a.Registry = registry.Default()
	}
}

const usage = `sluice — exactly-once stream pipelines (Flink's connector model in Go)

Usage:
  sluice run [flags] PIPELINE.yaml     run a pipeline (sluice run -h for flags)
  sluice validate PIPELINE.yaml        check a pipeline without running it
  sluice node --cluster-etcd EP PIPELINE.yaml  run one node of a cluster (the leader runs the job; docs/cluster.md)
  sluice demo [flags]                  run the embedded exactly-once demo (datagen → transforms → file sink)
  sluice checkpoints DIR               list the checkpoints and savepoints in DIR
  sluice checkpoints --pipeline PIPELINE.yaml [DIR]  the same with the pipeline's checkpoint settings (s3:// credentials; DIR: its checkpoint.dir)
  sluice connectors [NAME]             list connectors and their options
  sluice version                       print the version

SIGINT/SIGTERM stop a running job with a final checkpoint; a second signal cancels it.
Documentation: docs/cli.md
`

// Main runs the command in args (without the program name) and returns the
// process exit code.
func (a *App) Main(args []string) int {
	a.defaults()
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, usage)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "run":
		return a.cmdRun(rest)
	case "demo":
		return a.cmdDemo(rest)
	case "node":
		return a.cmdNode(rest)
	case "validate":
		err = a.cmdValidate(rest)
	case "checkpoints":
		err = a.cmdCheckpoints(rest)
	case "connectors":
		err = a.cmdConnectors(rest)
	case "version", "--version", "-version":
		a.printVersion()
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(a.Stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(a.Stderr, "sluice: unknown command %q\n\n%s", cmd, usage)
		return ExitUsage
	}
	return a.exit(err)
}

// usageError marks errors of the command line or the pipeline file.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func (a *App) exit(err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintln(a.Stderr, "sluice:", line)
	}
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, pipeline.ErrInvalid) {
		return ExitUsage
	}
	return ExitFailed
}

// parseFlags parses flags that may come before and after the positional
// arguments ("run p.yaml --from dir" works like "run --from dir p.yaml").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for range len(args) + 1 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return pos, nil
}

func (a *App) newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.Stderr, "Usage: sluice %s\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func (a *App) printVersion() {
	fmt.Fprintf(a.Stdout, "sluice %s", Version)
	if bi, ok := debug.ReadBuildInfo(); ok {
		fmt.Fprintf(a.Stdout, " (%s", bi.GoVersion)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				fmt.Fprintf(a.Stdout, ", commit %.12s", s.Value)
			case "CGO_ENABLED":
				fmt.Fprintf(a.Stdout, ", CGO_ENABLED=%s", s.Value)
			}
		}
		fmt.Fprint(a.Stdout, ")")
	}
	fmt.Fprintln(a.Stdout)
}
