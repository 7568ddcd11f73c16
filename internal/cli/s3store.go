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
)

// Checkpoint storage on S3-compatible object storage: checkpoint.dir,
// --from and `sluice checkpoints` take s3://bucket/prefix URLs. The
// client's endpoint, region and credentials come from the environment
// (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); path-style addressing.

// isS3 reports whether a checkpoint location is an s3:// URL.
func isS3(p string) bool { return s3.IsURL(p) }

// s3Storage opens the checkpoint storage at an s3:// URL.
func s3Storage(u string, retain int) (*s3.CheckpointStorage, error) {
	c, err := s3.New(s3.Getenv(os.Getenv))
	if err != nil {
		return nil, fmt.Errorf("checkpoints on %s: %w", u, err)
	}
	return c.CheckpointStorage(u, retain)
}

// s3Load loads what an s3:// --from names.
func s3Load(ctx context.Context, u string) (*checkpoint.Snapshot, checkpoint.Info, error) {
	c, err := s3.New(s3.Getenv(os.Getenv))
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", u, err)
	}
	s, info, err := c.Load(ctx, u)
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", u, err)
	}
	return s, info, nil
}

// s3ListSnapshots is listSnapshots for an s3:// storage.
func s3ListSnapshots(ctx context.Context, u string) (infos []checkpoint.Info, newest int64, hasNewest bool, st *s3.CheckpointStorage, err error) {
	st, err = s3Storage(u, 0)
	if err != nil {
		return nil, 0, false, nil, err
	}
	if infos, err = st.List(ctx); err != nil {
		return nil, 0, false, nil, err
	}
	newest, hasNewest, err = st.Newest(ctx)
	return infos, newest, hasNewest, st, err
}

// s3Checkpoints is `sluice checkpoints s3://…`: every snapshot, loaded and
// verified, and how to resume.
func (a *App) s3Checkpoints(ctx context.Context, u string) error {
	infos, newest, hasNewest, st, err := s3ListSnapshots(ctx, u)
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
