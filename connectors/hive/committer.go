package hive

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/sluice-io/sluice/connectors/file"
)

// Committer is the metastore partition commit policy: CommitPartition adds
// the partition to the table, or moves an existing partition to the new
// location. See [NewPartitionCommitter].
type Committer struct {
	client   *Client
	db, name string
	keys     []string               // the table's partition keys, lower case, in order
	sd       *hms.StorageDescriptor // the table's, the template of each partition's
}

var _ file.PartitionCommitter = (*Committer)(nil)

// NewPartitionCommitter returns the partition commit policy that registers
// each committed partition of a file sink with Hive-style buckets in the
// table db.table of the Hive Metastore at addr ("host:port"), as Flink's
// "metastore" policy does. It reads the table once: the table must exist
// ([ErrNoSuchTable]) and be partitioned; with [WithPartitionKeys] the
// names are checked against the table's partition keys here
// ([ErrPartitionKeys]).
//
// CommitPartition adds the partition with the partition's values in the
// table's key order (matched by name, case-insensitively as Hive does),
// its location set to [file.Partition.Location] and the rest of its
// storage descriptor (formats, serde, columns) copied from the table.
// It is idempotent: a partition that exists with the same location is a
// success; one with another location is altered to the new one. Calls are
// retried while the metastore is unreachable ([RetryTimeout]).
//
// A relative local Location is made absolute (the metastore would resolve
// it against its own working directory).
//
// The returned value is a [*Committer]; Close it when done (or pass
// [CloseAfterCall]).
func NewPartitionCommitter(ctx context.Context, addr, db, table string, opts ...Option) (file.PartitionCommitter, error) {
	if db == "" || table == "" {
		return nil, fmt.Errorf("%w: empty database or table name (%q.%q)", ErrInvalidConfig, db, table)
	}
	c, err := NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	t, err := c.table(ctx, db, table)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	pc := &Committer{client: c, db: db, name: table, sd: t.Sd}
	for _, k := range t.PartitionKeys {
		pc.keys = append(pc.keys, strings.ToLower(k.Name))
	}
	if len(pc.keys) == 0 {
		_ = c.Close()
		return nil, fmt.Errorf("%w: table %s.%s on %s is not partitioned", ErrPartitionKeys, db, table, addr)
	}
	if c.cfg.keysSet && !sameKeys(c.cfg.keys, pc.keys) {
		_ = c.Close()
		return nil, fmt.Errorf("%w: the sink's partitions are %s, table %s.%s on %s is partitioned by %s",
			ErrPartitionKeys, strings.Join(c.cfg.keys, "/"), db, table, addr, strings.Join(pc.keys, "/"))
	}
	if pc.sd == nil {
		pc.sd = hms.NewStorageDescriptor()
	}
	return pc, nil
}

// sameKeys: the same names (case-insensitive) in the same order.
func sameKeys(names, keys []string) bool {
	if len(names) != len(keys) {
		return false
	}
	for i := range names {
		if !strings.EqualFold(names[i], keys[i]) {
			return false
		}
	}
	return true
}

// PartitionKeys are the table's partition keys (lower case), in order.
func (pc *Committer) PartitionKeys() []string { return append([]string(nil), pc.keys...) }

// Close closes the metastore connection.
func (pc *Committer) Close() error { return pc.client.Close() }

// values orders p's values by the table's partition keys.
func (pc *Committer) values(p file.Partition) ([]string, error) {
	byName := make(map[string]string, len(p.Values))
	names := make([]string, 0, len(p.Values))
	for _, v := range p.Values {
		n := strings.ToLower(v.Name)
		if _, dup := byName[n]; dup {
			return nil, fmt.Errorf("%w: partition %q names %q twice", ErrPartitionKeys, p.Path, v.Name)
		}
		byName[n] = v.Value
		names = append(names, v.Name)
	}
	out := make([]string, 0, len(pc.keys))
	for _, k := range pc.keys {
		v, ok := byName[k]
		if !ok {
			break
		}
		out = append(out, v)
	}
	if len(out) != len(pc.keys) || len(byName) != len(pc.keys) {
		return nil, fmt.Errorf("%w: partition %q has %s, table %s.%s is partitioned by %s",
			ErrPartitionKeys, p.Path, strings.Join(names, "/"), pc.db, pc.name, strings.Join(pc.keys, "/"))
	}
	return out, nil
}

// CommitPartition adds p to the table (see [NewPartitionCommitter]).
func (pc *Committer) CommitPartition(ctx context.Context, p file.Partition) error {
	vals, err := pc.values(p)
	if err != nil {
		return err
	}
	if p.Location == "" {
		return fmt.Errorf("hive: partition %q of %s.%s has no location", p.Path, pc.db, pc.name)
	}
	loc := p.Location
	if !strings.Contains(loc, ":") && !filepath.IsAbs(loc) {
		// a local directory relative to the working directory: the
		// metastore would resolve it against its own
		if loc, err = filepath.Abs(loc); err != nil {
			return fmt.Errorf("hive: partition %q: location %q: %w", p.Path, p.Location, err)
		}
	}
	part := pc.partition(vals, loc)
	what := fmt.Sprintf("add_partition %s.%s %s", pc.db, pc.name, p.Path)
	err = pc.client.Do(ctx, what, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		_, err := ms.AddPartition(ctx, part)
		var exists *hms.AlreadyExistsException
		if !errors.As(err, &exists) {
			return err
		}
		old, err := ms.GetPartition(ctx, pc.db, pc.name, vals)
		if err != nil {
			return err
		}
		if old.Sd != nil && sameLocation(old.Sd.Location, loc) {
			return nil
		}
		if old.Sd == nil {
			old.Sd = pc.storage(loc)
		} else {
			old.Sd.Location = loc
		}
		return ms.AlterPartition(ctx, pc.db, pc.name, old)
	})
	if err != nil {
		return fmt.Errorf("hive: committing partition %q to %s.%s on %s: %w", p.Path, pc.db, pc.name, pc.client.addr, err)
	}
	return nil
}

func (pc *Committer) storage(location string) *hms.StorageDescriptor {
	sd := *pc.sd // a shallow copy: the table's columns and serde are shared, not changed
	sd.Location = location
	return &sd
}

func (pc *Committer) partition(vals []string, location string) *hms.Partition {
	part := hms.NewPartition()
	part.DbName, part.TableName = pc.db, pc.name
	part.Values = vals
	part.Sd = pc.storage(location)
	part.Parameters = map[string]string{}
	return part
}

// sameLocation compares two locations as the metastore qualifies them: a
// local path "/a/b" is stored as "file:/a/b"; trailing slashes do not count.
func sameLocation(a, b string) bool {
	return normLocation(a) == normLocation(b)
}

func normLocation(s string) string {
	switch {
	case strings.HasPrefix(s, "file:///"):
		s = s[len("file://"):]
	case strings.HasPrefix(s, "file:/"):
		s = s[len("file:"):]
	}
	if strings.HasPrefix(s, "/") {
		return path.Clean(s)
	}
	return strings.TrimRight(s, "/")
}
