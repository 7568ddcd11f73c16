package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/hive"
)

// The file sink's "metastore" partition commit policy (connectors/hive):
// each committed partition is added to a Hive Metastore table.
var _ = RegisterPartitionCommitter("metastore", PartitionCommitterFactory{
	Options: []Option{
		{Name: "hive-metastore", Type: String, Check: checkHostPort,
			Description: "partition-commit.policy metastore: the Hive Metastore's Thrift address, host:port (binary protocol, no SASL)"},
		{Name: "hive-table", Type: String, Check: checkHiveTable,
			Description: "partition-commit.policy metastore: the table, db.table; it must exist, be partitioned by partition-by's names in order, and is not created"},
		{Name: "hive-retry-timeout", Type: Duration, Default: 2 * time.Minute, Check: checkHiveRetry,
			Description: "partition-commit.policy metastore: how long a call is retried while the metastore is unreachable before the job fails (and restarts from its last checkpoint)"},
	},
	New: newHivePartitionCommitter,
})

func checkHiveRetry(v any) error {
	if d, ok := v.(time.Duration); ok && d < time.Second {
		return fmt.Errorf("must be at least 1s, got %v", d)
	}
	return nil
}

func checkHostPort(v any) error {
	s, _ := v.(string)
	host, port, ok := strings.Cut(s, ":")
	if !ok || host == "" || port == "" {
		return fmt.Errorf("want host:port, got %q", s)
	}
	return nil
}

func checkHiveTable(v any) error {
	s, _ := v.(string)
	db, t, ok := strings.Cut(s, ".")
	if !ok || db == "" || t == "" || strings.Contains(t, ".") {
		return fmt.Errorf("want db.table, got %q", s)
	}
	return nil
}

func newHivePartitionCommitter(c BuildContext, _ string) (file.PartitionCommitter, error) {
	o := c.Options
	addr, table := o.String("hive-metastore"), o.String("hive-table")
	if addr == "" {
		return nil, optErr("hive-metastore", "required with partition-commit.policy metastore (host:port)")
	}
	if table == "" {
		return nil, optErr("hive-table", "required with partition-commit.policy metastore (db.table)")
	}
	db, name, _ := strings.Cut(table, ".")
	parts, err := parsePartitionBy(o.Strings("partition-by"))
	if err != nil {
		return nil, optErr("partition-by", "%v", err)
	}
	keys := make([]string, 0, len(parts))
	for _, p := range parts {
		keys = append(keys, p.name)
	}
	retry := o.Duration("hive-retry-timeout")
	ctx, cancel := context.WithTimeout(context.Background(), retry+time.Minute)
	defer cancel()
	// the sink never closes its policies: no connection stays open
	// between commits
	return hive.NewPartitionCommitter(ctx, addr, db, name,
		hive.WithPartitionKeys(keys...), hive.RetryTimeout(retry), hive.CloseAfterCall())
}
