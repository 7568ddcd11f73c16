package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-io/sluice/internal/cliui"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/runtime/checkpoint"
)

func (a *App) cmdCheckpoints(args []string) error {
	fs := a.newFlags("checkpoints", "checkpoints DIR")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError{err}
	}
	if len(pos) != 1 {
		return usagef("checkpoints needs one directory")
	}
	dir := pos[0]
	ctx := context.Background()
	infos, err := checkpoint.ListDir(ctx, dir)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		// DIR may be a snapshot directory itself.
		if _, info, lerr := checkpoint.Load(ctx, dir); lerr == nil {
			infos = []checkpoint.Info{info}
		}
	}
	if len(infos) == 0 {
		fmt.Fprintf(a.Stdout, "no checkpoints or savepoints in %s\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tJOB\tTAKEN (UTC)\tSIZE\tPATH")
	var warnings []string
	for _, in := range infos {
		taken, size := "?", "?"
		if in.Warning == nil {
			taken, size = in.Timestamp.UTC().Format(time.DateTime), cliui.Bytes(in.Size)
		} else {
			warnings = append(warnings, in.Warning.Error())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Kind, in.JobName, taken, size, in.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(a.Stdout, "warning:", w)
	}
	fmt.Fprintf(a.Stdout, "resume the newest with: sluice run --from %s PIPELINE.yaml (or --from one snapshot's PATH)\n", dir)
	return nil
}

func (a *App) cmdConnectors(args []string) error {
	fs := a.newFlags("connectors", "connectors [NAME]")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError{err}
	}
	var only string
	if len(pos) > 1 {
		return usagef("connectors takes at most one name")
	}
	if len(pos) == 1 {
		only = pos[0]
	}
	found := false
	w := a.Stdout
	for _, c := range a.Registry.Connectors() {
		if only != "" && c.Name != only {
			continue
		}
		found = true
		eo := ""
		if c.Kind == registry.KindSink {
			eo = " (at-least-once)"
			if c.ExactlyOnce {
				eo = " (exactly-once)"
			}
		}
		fmt.Fprintf(w, "%s %s%s\n  %s\n", c.Kind, c.Name, eo, c.Description)
		printOptions(w, "  ", c.Options)
		fmt.Fprintln(w)
	}
	if only != "" && !found {
		return usagef("no connector named %q (known sources: %s; sinks: %s)", only,
			strings.Join(a.Registry.Names(registry.KindSource), ", "), strings.Join(a.Registry.Names(registry.KindSink), ", "))
	}
	if only == "" {
		js := pipeline.JobSchema()
		fmt.Fprintln(w, "job settings (top level of a pipeline file)")
		printOptions(w, "  ", js[""])
		for _, sec := range []string{"checkpoint", "restart", "http"} {
			fmt.Fprintf(w, "\n%s:\n", sec)
			printOptions(w, "  ", js[sec])
		}
	}
	return nil
}

func printOptions(w interface{ Write([]byte) (int, error) }, indent string, opts []registry.Option) {
	if len(opts) == 0 {
		fmt.Fprintf(w, "%s(no options)\n", indent)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, o := range opts {
		typ := string(o.Type)
		if o.Type == registry.Enum {
			typ = strings.Join(o.Values, "|")
		}
		def := registry.FormatDefault(o)
		switch {
		case o.Required:
			def = "required"
		case def == "" || def == `""`:
			def = "-"
		case o.Secret:
			def = "(secret)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\n", indent, o.Name, typ, def, o.Description)
	}
	_ = tw.Flush()
}

// partFiles returns the committed (visible) files under dir: every regular
// file whose name does not start with '.' or '_'.
func partFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return files, err
}
