package cli

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/s3"
	"github.com/sluice-io/sluice/internal/cliui"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
)

// Checkpoint storage on S3-compatible object storage: checkpoint.dir,
// --from and `sluice checkpoints` take s3://bucket/prefix URLs. The
// client's endpoint, region, credentials and addressing come from the
// pipeline's checkpoint.s3.* settings (secrets as ${VAR} or written in
// the file), each defaulting to the environment (AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN); `sluice checkpoints` uses those of the file given
// with --pipeline, else the environment. A run holds the prefix's lock object (connectors/s3
// CheckpointStorage.Lock) and fails the job when it loses it.

// isS3 reports whether a checkpoint location is an s3:// URL.
func isS3(p string) bool { return s3.IsURL(p) }

// s3CheckpointSettings are the checkpoint section's s3.* settings.
var s3CheckpointSettings = []string{"s3.endpoint", "s3.region", "s3.path-style", "s3.access-key", "s3.secret-key", "s3.session-token", "s3.lock", "s3.lock-ttl"}

// s3CheckSettings fails if checkpoint.s3.* settings are given for a
// checkpoint dir that is not on s3://.
func s3CheckSettings(spec *pipeline.Spec) error {
	if isS3(spec.CheckpointDir) {
		return nil
	}
	for _, n := range s3CheckpointSettings {
		if spec.CheckpointOptions.Has(n) {
			return usagef("%s: checkpoint.%s applies to a checkpoint.dir on s3:// only (checkpoint.dir is %q)", spec.File, n, spec.CheckpointDir)
		}
	}
	return nil
}

// s3Client makes the client of the checkpoint settings co (the zero
// Options: the environment's).
func s3Client(co registry.Options) (*s3.Client, error) {
	opts := []s3.Option{s3.Getenv(os.Getenv)}
	if co.Has("s3.path-style") {
		opts = append(opts, s3.PathStyle(co.Bool("s3.path-style")))
	}
	if co.Has("s3.endpoint") {
		opts = append(opts, s3.Endpoint(co.String("s3.endpoint")))
	}
	if co.Has("s3.region") {
		opts = append(opts, s3.Region(co.String("s3.region")))
	}
	if co.Has("s3.access-key") != co.Has("s3.secret-key") {
		return nil, fmt.Errorf("checkpoint.s3.access-key and checkpoint.s3.secret-key: set both, or neither (then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): %w", s3.ErrInvalidConfig)
	}
	if co.Has("s3.access-key") {
		opts = append(opts, s3.Credentials(co.String("s3.access-key"), co.String("s3.secret-key")))
	}
	if co.Has("s3.session-token") {
		opts = append(opts, s3.SessionToken(co.String("s3.session-token")))
	}
	return s3.New(opts...)
}

// s3Storage opens the checkpoint storage at an s3:// URL.
func s3Storage(u string, retain int, co registry.Options, opts ...s3.CheckpointOption) (*s3.CheckpointStorage, *s3.Client, error) {
	c, err := s3Client(co)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoints on %s: %w", u, err)
	}
	st, err := c.CheckpointStorage(u, retain, opts...)
	if err != nil {
		return nil, nil, err
	}
	return st, c, nil
}

// s3OpenStore opens and locks the pipeline's checkpoint prefix. onLost is
// called (once, from another goroutine) if the lock is lost while the job
// runs: it must end the job.
func s3OpenStore(spec *pipeline.Spec, onLost func(error)) (checkpoint.Storage, func(), error) {
	co := spec.CheckpointOptions
	opts := []s3.CheckpointOption{s3.OnLockLost(onLost)}
	if co.Has("s3.lock-ttl") {
		opts = append(opts, s3.LockTTL(co.Duration("s3.lock-ttl")))
	}
	if co.Has("s3.lock") && !co.Bool("s3.lock") {
		opts = append(opts, s3.NoLock())
	}
	st, c, err := s3Storage(spec.CheckpointDir, checkpointRetain(spec), co, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: checkpoint.dir: %w", spec.File, err)
	}
	unlock, err := st.Lock()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: checkpoint.dir %s (%s): %w", spec.File, spec.CheckpointDir, c.ServerName(), err)
	}
	return st, unlock, nil
}

func checkpointRetain(spec *pipeline.Spec) int {
	if spec.CheckpointRetain > 0 {
		return spec.CheckpointRetain
	}
	return checkpoint.DefaultRetain
}

// s3Load loads what an s3:// --from names, with the client of the
// checkpoint settings co.
func s3Load(ctx context.Context, u string, co registry.Options) (*checkpoint.Snapshot, checkpoint.Info, error) {
	c, err := s3Client(co)
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", u, err)
	}
	s, info, err := c.Load(ctx, u)
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s (%s): %w", u, c.ServerName(), err)
	}
	return s, info, nil
}

// s3LoadRestore is loadRestore for an s3:// --from of a pipeline: the
// pipeline's checkpoint settings make the client.
func s3LoadRestore(ctx context.Context, spec *pipeline.Spec, from string, lookup func(string) (string, bool)) (*checkpoint.Snapshot, checkpoint.Info, error) {
	s, info, err := s3Load(ctx, from, spec.CheckpointOptions)
	if err != nil {
		return nil, info, err
	}
	if err := decodeSnapshot(s, lookup); err != nil {
		return nil, info, fmt.Errorf("--from %s: %w", info.Path, err)
	}
	return s, info, nil
}

// s3ListSnapshots is listSnapshots for an s3:// storage.
func s3ListSnapshots(ctx context.Context, u string, co registry.Options) (infos []checkpoint.Info, newest int64, hasNewest bool, st *s3.CheckpointStorage, err error) {
	st, c, err := s3Storage(u, 0, co)
	if err != nil {
		return nil, 0, false, nil, err
	}
	if infos, err = st.List(ctx); err != nil {
		return nil, 0, false, nil, fmt.Errorf("%s: %w", c.ServerName(), err)
	}
	newest, hasNewest, err = st.Newest(ctx)
	return infos, newest, hasNewest, st, err
}

// s3Checkpoints is `sluice checkpoints s3://…`: every snapshot, loaded and
// verified, and how to resume. co are the checkpoint settings of
// --pipeline's file (the zero Options without it: the environment's).
func (a *App) s3Checkpoints(ctx context.Context, u string, co registry.Options) error {
	infos, newest, hasNewest, st, err := s3ListSnapshots(ctx, u, co)
	if err != nil {
		return err
	}
	if len(infos) == 0 && !hasNewest {
		fmt.Fprintf(a.Stdout, "no checkpoints or savepoints in %s\n", u)
		return nil
	}
	if id, err := st.JobID(); err == nil && id != "" {
		fmt.Fprintf(a.Stdout, "job id %s\n", id)
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tJOB\tTAKEN (UTC)\tSIZE\tSTATUS\tPATH")
	var warnings []string
	var newestDamaged error
	listed := false
	for _, in := range infos {
		taken, size, status := "?", "?", "ok"
		if in.Warning == nil {
			taken, size = in.Timestamp.UTC().Format(time.DateTime), cliui.Bytes(in.Size)
			if _, _, lerr := st.Get(ctx, in.Kind, in.ID); lerr != nil {
				in.Warning = lerr
			}
		}
		if in.Warning != nil {
			status = "DAMAGED"
			warnings = append(warnings, in.Warning.Error())
		}
		if hasNewest && in.Kind == checkpoint.Checkpoint && in.ID == newest {
			listed, newestDamaged = true, in.Warning
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Kind, displayRefs(in.JobName), taken, size, status, in.Path)
	}
	if hasNewest && !listed {
		newestDamaged = fmt.Errorf("checkpoint %d is recorded as the newest completed one in %s/_latest, but its _metadata is gone: %w", newest, u, checkpoint.ErrNotFound)
		warnings = append(warnings, newestDamaged.Error())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintln(a.Stdout, "warning:", w)
	}
	if newestDamaged != nil {
		fmt.Fprintf(a.Stdout, "the newest completed checkpoint, %d, is damaged: `sluice run --from %s` refuses to start; name an older one (…/chk-N) to resume from it anyway (it may duplicate output committed after it)\n", newest, u)
		return nil
	}
	fmt.Fprintf(a.Stdout, "resume the newest with: sluice run --from %s PIPELINE.yaml (or --from one snapshot's PATH)\n", u)
	return nil
}
