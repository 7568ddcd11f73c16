package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cliui"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
)

// checkpointsTarget parses the arguments of `sluice checkpoints`: the
// directory to list and the checkpoint settings to read it with, those of
// --pipeline's file (the zero Options without it: the environment's).
// With --pipeline the returned App hides the file's ${VAR} values in what
// it prints, as a run does.
func (a *App) checkpointsTarget(args []string) (*App, string, registry.Options, error) {
	fs := a.newFlags("checkpoints", "checkpoints [--pipeline PIPELINE.yaml] [DIR]")
	file := fs.String("pipeline", "", "take the checkpoint settings from this pipeline file: checkpoint.s3.* (endpoint, credentials) for an s3:// DIR, and DIR itself (checkpoint.dir) when it is not given")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return a, "", registry.Options{}, usageError{err}
	}
	var co registry.Options
	dir := ""
	if *file != "" {
		spec, err := pipeline.Load(*file, a.Registry, a.Getenv)
		if err != nil {
			return a, "", co, loadError(err)
		}
		a = a.redacted(pipeline.NewRedactor(spec.Secrets))
		co, dir = spec.CheckpointOptions, spec.CheckpointDir
	}
	switch {
	case len(pos) == 1:
		dir = pos[0]
	case len(pos) > 1:
		return a, "", co, usagef("checkpoints takes one directory")
	case dir == "" && *file != "":
		return a, "", co, usagef("checkpoints: %s has no checkpoint.dir: name the directory", *file)
	case dir == "":
		return a, "", co, usagef("checkpoints needs one directory (or --pipeline PIPELINE.yaml with a checkpoint.dir)")
	}
	return a, dir, co, nil
}

func (a *App) cmdCheckpoints(args []string) error {
	a, dir, co, err := a.checkpointsTarget(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if isS3(dir) {
		return a.s3Checkpoints(ctx, dir, co)
	}
	infos, newest, hasNewest, newestDamaged, err := listSnapshots(ctx, dir)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		fmt.Fprintf(a.Stdout, "no checkpoints or savepoints in %s\n", dir)
		return nil
	}
	if id, err := checkpoint.ReadJobID(dir); err == nil && id != "" {
		fmt.Fprintf(a.Stdout, "job id %s\n", id)
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tJOB\tTAKEN (UTC)\tSIZE\tSTATUS\tPATH")
	var warnings []string
	var olderOK int64 = -1 // the newest loadable checkpoint older than a damaged newest
	for _, in := range infos {
		taken, size, status := "?", "?", "ok"
		if in.Warning == nil {
			taken, size = in.Timestamp.UTC().Format(time.DateTime), cliui.Bytes(in.Size)
			// _metadata reads; verify the state too (size, CRC-32C,
			// structure), so a torn state file shows.
			if _, _, lerr := checkpoint.Load(ctx, in.Path); lerr != nil {
				in.Warning = lerr
			}
		}
		if in.Warning != nil {
			status = "DAMAGED"
			warnings = append(warnings, in.Warning.Error())
		} else if in.Kind == checkpoint.Checkpoint && hasNewest && in.ID < newest {
			olderOK = in.ID
		}
		if hasNewest && in.Kind == checkpoint.Checkpoint && in.ID == newest && in.Warning != nil {
			newestDamaged = in.Warning
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Kind, displayRefs(in.JobName), taken, size, status, in.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(a.Stdout, "warning:", w)
	}
	if hasNewest && newestDamaged != nil {
		fmt.Fprintf(a.Stdout, "the newest completed checkpoint, %d, is damaged: `sluice run --from %s` refuses to start.\n", newest, dir)
		if olderOK >= 0 {
			fmt.Fprintf(a.Stdout, "to resume from an older one anyway, name it: sluice run --from %s PIPELINE.yaml (it may duplicate output committed after it)\n",
				filepath.Join(dir, fmt.Sprintf("chk-%d", olderOK)))
		}
		return nil
	}
	fmt.Fprintf(a.Stdout, "resume the newest with: sluice run --from %s PIPELINE.yaml (or --from one snapshot's PATH)\n", dir)
	return nil
}

// listSnapshots lists the snapshots in dir for cmdCheckpoints, with the
// newest completed checkpoint (see checkpoint.Newest), including one
// recorded in _latest whose _metadata or directory is gone. dir may also be
// a snapshot directory itself.
func listSnapshots(ctx context.Context, dir string) (infos []checkpoint.Info, newest int64, hasNewest bool, newestDamaged, err error) {
	infos, err = checkpoint.ListDir(ctx, dir)
	if err != nil {
		return nil, 0, false, nil, err
	}
	newest, hasNewest, newestDamaged, err = checkpoint.Newest(ctx, dir)
	if err != nil {
		return nil, 0, false, nil, err
	}
	if hasNewest && newestDamaged != nil && !slices.ContainsFunc(infos, func(in checkpoint.Info) bool {
		return in.Kind == checkpoint.Checkpoint && in.ID == newest
	}) {
		abs, _ := filepath.Abs(dir)
		infos = append(infos, checkpoint.Info{ID: newest, Kind: checkpoint.Checkpoint, Path: filepath.Join(abs, fmt.Sprintf("chk-%d", newest)), Warning: newestDamaged})
	}
	if len(infos) == 0 {
		if _, info, lerr := checkpoint.Load(ctx, dir); lerr == nil {
			infos = []checkpoint.Info{info}
		} else if !errors.Is(lerr, checkpoint.ErrNotFound) {
			infos = []checkpoint.Info{{Path: dir, Warning: lerr}}
		}
	}
	return infos, newest, hasNewest, newestDamaged, nil
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
