package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/s3"
)

// PartitionCommitterFactory makes a partition commit policy of the file
// sink, named in its partition-commit.policy option (Flink's
// sink.partition-commit.policy.kind). Options are added to the file
// sink's options (name them <policy>.…); New gets the sink's build
// context and its base location (a directory, or an s3:// URL).
type PartitionCommitterFactory struct {
	Options []Option
	New     func(c BuildContext, base string) (file.PartitionCommitter, error)
}

// partitionCommitters holds the policies besides success-file, by name.
// It is filled by package-level variable initializers
// (var _ = RegisterPartitionCommitter(…)), which run before the init
// functions that register the sinks, and read-only after.
var partitionCommitters = map[string]PartitionCommitterFactory{}

// RegisterPartitionCommitter adds a partition commit policy for the file
// sink's partition-commit.policy (for example "metastore", by the Hive
// Metastore connector). Call it from a package-level variable
// initializer: var _ = RegisterPartitionCommitter("metastore", …). It
// panics on a duplicate or reserved name.
func RegisterPartitionCommitter(name string, f PartitionCommitterFactory) bool {
	if _, dup := partitionCommitters[name]; dup || name == "success-file" || f.New == nil {
		panic(fmt.Sprintf("registry: partition committer %q registered twice, reserved, or without New", name))
	}
	partitionCommitters[name] = f
	return true
}

// partitionCommitPolicies lists the policy names.
func partitionCommitPolicies() []string {
	return append([]string{"success-file"}, slices.Sorted(maps.Keys(partitionCommitters))...)
}

// partitionCommitOptions are the file sink's partition-commit.* options
// and the registered policies' options.
func partitionCommitOptions() []Option {
	opts := []Option{
		{Name: "partition-commit.policy", Type: Strings, Default: []string{},
			Description: "commit complete partitions of partition-by (Flink's sink.partition-commit.policy.kind), in order: " +
				"success-file (an empty _SUCCESS in the partition directory)" + registeredPolicies() + "; default: none (off)"},
		{Name: "partition-commit.trigger", Type: Enum, Values: []string{"process-time", "partition-time"}, Default: "process-time",
			Description: "when a partition is complete: process-time: its first files' commit + delay passed on the clock; " +
				"partition-time: the watermark (minimum over writers) passed its time (from its values, partition-commit.timestamp-pattern) + delay"},
		{Name: "partition-commit.delay", Type: Duration, Default: time.Duration(0), Check: AtLeast(0),
			Description: "added to the creation or partition time (1h for hourly partitions with partition-time)"},
		{Name: "partition-commit.time-zone", Type: String, Default: "UTC",
			Description: "the time zone of the partition values' times for partition-time (an IANA name)"},
		{Name: "partition-commit.timestamp-pattern", Type: String,
			Description: "the partition's time from its values, $name for a value: \"$dt $hr:00:00\"; default: the first partition's value " +
				"(2006-01-02, 2006-01-02 15:04:05 and 2006-01-02 15:04 are parsed)"},
	}
	for _, name := range slices.Sorted(maps.Keys(partitionCommitters)) {
		opts = append(opts, partitionCommitters[name].Options...)
	}
	return opts
}

func registeredPolicies() string {
	s := ""
	for _, name := range slices.Sorted(maps.Keys(partitionCommitters)) {
		s += ", " + name
	}
	return s
}

// validatePartitionCommit checks the partition-commit.* options.
func validatePartitionCommit(o Options) error {
	pols := o.Strings("partition-commit.policy")
	if len(pols) == 0 {
		// A partition-commit.* option the user set, even to its
		// default, is refused: it would do nothing.
		for _, op := range partitionCommitOptions() {
			if strings.HasPrefix(op.Name, "partition-commit.") && op.Name != "partition-commit.policy" && o.IsSet(op.Name) {
				return optErr(op.Name, "applies only with partition-commit.policy")
			}
		}
		return nil
	}
	if len(o.Strings("partition-by")) == 0 {
		return optErr("partition-commit.policy", "needs partition-by (partitions are Hive-style directories)")
	}
	seen := map[string]bool{}
	for _, p := range pols {
		if _, ok := partitionCommitters[p]; !ok && p != "success-file" {
			return optErr("partition-commit.policy", "unknown policy %q; known: %v", p, partitionCommitPolicies())
		}
		if seen[p] {
			return optErr("partition-commit.policy", "lists %q twice", p)
		}
		seen[p] = true
	}
	if _, err := time.LoadLocation(o.String("partition-commit.time-zone")); err != nil {
		return optErr("partition-commit.time-zone", "%v", err)
	}
	return nil
}

// partitionCommitOption returns the sink option of the partition-commit.*
// options, or nil when partition-commit.policy is empty.
func partitionCommitOption(c BuildContext) (file.SinkOption, error) {
	o := c.Options
	pols := o.Strings("partition-commit.policy")
	if len(pols) == 0 {
		return nil, nil
	}
	tz, err := time.LoadLocation(o.String("partition-commit.time-zone"))
	if err != nil {
		return nil, optErr("partition-commit.time-zone", "%v", err)
	}
	s := file.PartitionCommitStrategy{Delay: o.Duration("partition-commit.delay"), TimeZone: tz,
		TimestampPattern: o.String("partition-commit.timestamp-pattern")}
	if o.String("partition-commit.trigger") == "partition-time" {
		s.Trigger = file.PartitionTimeTrigger
	}
	for _, p := range pols {
		if p == "success-file" {
			s.Policies = append(s.Policies, file.SuccessFile())
			continue
		}
		f, ok := partitionCommitters[p]
		if !ok {
			return nil, optErr("partition-commit.policy", "unknown policy %q; known: %v", p, partitionCommitPolicies())
		}
		pc, err := f.New(c, o.String("path"))
		if err != nil {
			return nil, fmt.Errorf("partition-commit.policy %s: %w", p, err)
		}
		s.Policies = append(s.Policies, pc)
	}
	return file.PartitionCommit(s), nil
}

// s3PartStore is the sink's object store with what partition commit
// needs: reading its state back and naming partitions' locations.
type s3PartStore struct {
	*s3.Store
	fs     s3.FS
	bucket string
}

var (
	_ file.ObjectReader  = s3PartStore{}
	_ file.ObjectLocator = s3PartStore{}
)

func (s s3PartStore) Location(key string) string { return "s3://" + s.bucket + "/" + key }

func (s s3PartStore) ReadObject(ctx context.Context, key string) ([]byte, bool, error) {
	f, err := s.fs.Open(ctx, s.Location(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return b, err == nil, err
}
