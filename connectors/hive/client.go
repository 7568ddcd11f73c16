package hive

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	hms "github.com/beltran/gohive/hive_metastore"
)

// Sentinel errors; the errors returned wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every configuration error; the
	// message names the option and what is allowed.
	ErrInvalidConfig = errors.New("hive: invalid configuration")
	// ErrUnreachable is wrapped when the metastore did not answer
	// (connection refused, lost or timed out) within the retries.
	ErrUnreachable = errors.New("hive: metastore unreachable")
	// ErrNoSuchTable is wrapped when the table (or its database) does not
	// exist.
	ErrNoSuchTable = errors.New("hive: no such table")
	// ErrPartitionKeys is wrapped when a partition's names, or the names
	// given with [WithPartitionKeys], do not match the table's partition
	// keys; the message names both.
	ErrPartitionKeys = errors.New("hive: partition keys do not match the table")
)

// Option configures a [Client] or a partition committer.
type Option func(*config) error

type config struct {
	connectTimeout time.Duration
	callTimeout    time.Duration
	retryTimeout   time.Duration
	backoffMin     time.Duration
	backoffMax     time.Duration
	keys           []string
	keysSet        bool
	closeAfterCall bool
}

func defaults() config {
	return config{
		connectTimeout: 10 * time.Second,
		callTimeout:    60 * time.Second,
		retryTimeout:   2 * time.Minute,
		backoffMin:     200 * time.Millisecond,
		backoffMax:     5 * time.Second,
	}
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: %s must be positive, got %v", ErrInvalidConfig, name, d)
	}
	return nil
}

// ConnectTimeout bounds one connection attempt to the metastore (default
// 10s).
func ConnectTimeout(d time.Duration) Option {
	return func(c *config) error { c.connectTimeout = d; return positive("ConnectTimeout", d) }
}

// CallTimeout bounds one Thrift call: the time the metastore may take to
// answer before the connection counts as lost (default 60s). A context
// deadline that comes sooner wins.
func CallTimeout(d time.Duration) Option {
	return func(c *config) error { c.callTimeout = d; return positive("CallTimeout", d) }
}

// RetryTimeout is how long a call is retried, reconnecting, while the
// metastore is unreachable (connection refused, lost or timed out) before
// it fails with [ErrUnreachable] (default 2m: a metastore restart). Errors
// the metastore answered with (no such table, invalid object) are never
// retried.
func RetryTimeout(d time.Duration) Option {
	return func(c *config) error { c.retryTimeout = d; return positive("RetryTimeout", d) }
}

// Backoff sets the wait between retries: it starts at min and doubles up
// to max, with jitter (default 200ms to 5s).
func Backoff(min, max time.Duration) Option {
	return func(c *config) error {
		c.backoffMin, c.backoffMax = min, max
		if err := positive("Backoff min", min); err != nil {
			return err
		}
		if max < min {
			return fmt.Errorf("%w: Backoff max %v is below min %v", ErrInvalidConfig, max, min)
		}
		return nil
	}
}

// WithPartitionKeys declares the partition names the committer will be
// given, in directory order (for example "dt", "hr"): NewPartitionCommitter
// checks them against the table's partition keys and fails at once with
// [ErrPartitionKeys] on a mismatch. Without it the check happens at each
// commit. Client ignores it.
func WithPartitionKeys(names ...string) Option {
	return func(c *config) error {
		if len(names) == 0 {
			return fmt.Errorf("%w: WithPartitionKeys needs at least one name", ErrInvalidConfig)
		}
		c.keys, c.keysSet = append([]string(nil), names...), true
		return nil
	}
}

// CloseAfterCall closes the connection after every call (and its
// retries) instead of keeping it open until Close: for a committer whose
// owner never closes it, such as the file sink's policies, which commit
// seldom (once per partition). Default: keep the connection.
func CloseAfterCall() Option {
	return func(c *config) error { c.closeAfterCall = true; return nil }
}

func newConfig(opts []Option) (config, error) {
	c := defaults()
	for _, o := range opts {
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Client is a Hive Metastore Thrift client (binary protocol, buffered
// transport, no SASL) with one connection that it opens on first use and
// reopens after it is lost. Every call is retried while the metastore is
// unreachable, up to [RetryTimeout]. A Client is safe for concurrent use;
// calls are serialized on its connection.
type Client struct {
	addr string
	cfg  config

	mu     sync.Mutex // serializes calls; guards the fields below
	sock   *thrift.TSocket
	trans  thrift.TTransport
	client *hms.ThriftHiveMetastoreClient
	closed bool
}

// NewClient returns a client of the metastore at addr ("host:port"). It
// connects on the first call.
func NewClient(addr string, opts ...Option) (*Client, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: empty metastore address (want host:port)", ErrInvalidConfig)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Client{addr: addr, cfg: cfg}, nil
}

// Addr is the metastore's address.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection. Calls after Close fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.disconnect()
}

func (c *Client) disconnect() error {
	if c.trans == nil {
		return nil
	}
	err := c.trans.Close()
	c.sock, c.trans, c.client = nil, nil, nil
	return err
}

func (c *Client) connect() error {
	if c.client != nil {
		return nil
	}
	conf := &thrift.TConfiguration{ConnectTimeout: c.cfg.connectTimeout, SocketTimeout: c.cfg.callTimeout}
	sock := thrift.NewTSocketConf(c.addr, conf)
	trans := thrift.NewTBufferedTransport(sock, 64<<10)
	if err := trans.Open(); err != nil {
		return err
	}
	proto := thrift.NewTBinaryProtocolConf(trans, conf)
	c.sock, c.trans = sock, trans
	c.client = hms.NewThriftHiveMetastoreClient(thrift.NewTStandardClient(proto, proto))
	return nil
}

// Do runs fn with the generated Thrift client
// (github.com/beltran/gohive/hive_metastore), connecting first. When fn
// fails because the connection was refused, lost or timed out, Do
// reconnects and runs fn again, with backoff, until [RetryTimeout] or ctx
// ends; so fn must be safe to repeat (an add that reached the metastore
// before the connection broke is seen again as "already exists"). Errors
// the metastore answered with are returned at once. what names the call
// in errors.
func (c *Client) Do(ctx context.Context, what string, fn func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.closeAfterCall {
		defer func() { _ = c.disconnect() }()
	}
	deadline := time.Now().Add(c.cfg.retryTimeout)
	wait := c.cfg.backoffMin
	for attempt := 1; ; attempt++ {
		if c.closed {
			return fmt.Errorf("hive: %s on %s: client closed", what, c.addr)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("hive: %s on %s: %w", what, c.addr, err)
		}
		err := c.connect()
		if err == nil {
			timeout := c.cfg.callTimeout
			if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
				timeout = max(time.Until(d), time.Millisecond)
			}
			_ = c.sock.SetSocketTimeout(timeout)
			err = fn(ctx, c.client)
			if err == nil {
				return nil
			}
			if !retryable(err) {
				return err
			}
			// the connection's state is unknown: never reuse it
			_ = c.disconnect()
		}
		if ctx.Err() != nil {
			return fmt.Errorf("hive: %s on %s: %w (last error: %v)", what, c.addr, ctx.Err(), err)
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w: %s on %s failed %d times in %v: %v", ErrUnreachable, what, c.addr, attempt, c.cfg.retryTimeout, err)
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("hive: %s on %s: %w (last error: %v)", what, c.addr, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, c.cfg.backoffMax)
	}
}

// retryable reports whether err means the connection failed (retry on a
// new one) rather than an answer of the metastore.
func retryable(err error) bool {
	var (
		meta    *hms.MetaException
		exists  *hms.AlreadyExistsException
		invalid *hms.InvalidObjectException
		noSuch  *hms.NoSuchObjectException
		app     thrift.TApplicationException
	)
	switch {
	case errors.As(err, &meta), errors.As(err, &exists), errors.As(err, &invalid),
		errors.As(err, &noSuch), errors.As(err, &app):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}

// Table is what a partition commit needs of a table.
type Table struct {
	DB, Name string
	// PartitionKeys are the table's partition column names, in order.
	PartitionKeys []string
	// Location is the table's storage location.
	Location string
	// Type is the table type, e.g. "EXTERNAL_TABLE" or "MANAGED_TABLE".
	Type string
}

// Table reads a table; a missing table or database is [ErrNoSuchTable].
func (c *Client) Table(ctx context.Context, db, table string) (Table, error) {
	t, err := c.table(ctx, db, table)
	if err != nil {
		return Table{}, err
	}
	out := Table{DB: t.DbName, Name: t.TableName, Type: t.TableType}
	if t.Sd != nil {
		out.Location = t.Sd.Location
	}
	for _, k := range t.PartitionKeys {
		out.PartitionKeys = append(out.PartitionKeys, k.Name)
	}
	return out, nil
}

func (c *Client) table(ctx context.Context, db, table string) (*hms.Table, error) {
	var t *hms.Table
	err := c.Do(ctx, "get_table "+db+"."+table, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		// get_table_req: Hive 4 dropped get_table
		res, err := ms.GetTableReq(ctx, &hms.GetTableRequest{DbName: db, TblName: table})
		if err != nil {
			return err
		}
		if res.Table == nil {
			return hms.NewNoSuchObjectException()
		}
		t = res.Table
		return nil
	})
	var noSuch *hms.NoSuchObjectException
	if errors.As(err, &noSuch) {
		return nil, fmt.Errorf("%w: %s.%s on %s: %s", ErrNoSuchTable, db, table, c.addr, noSuch.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("hive: get_table %s.%s on %s: %w", db, table, c.addr, err)
	}
	return t, nil
}

// PartitionInfo is one partition of a table as the metastore has it.
type PartitionInfo struct {
	// Values are the partition's values in the table's partition-key order.
	Values []string
	// Location is the partition's storage location as the metastore
	// stores it (a local path qualified as "file:/…").
	Location string
}

func partitionInfo(p *hms.Partition) PartitionInfo {
	out := PartitionInfo{Values: p.Values}
	if p.Sd != nil {
		out.Location = p.Sd.Location
	}
	return out
}

// Partition reads one partition by its values in partition-key order;
// found is false when it does not exist.
func (c *Client) Partition(ctx context.Context, db, table string, values []string) (p PartitionInfo, found bool, err error) {
	var got *hms.Partition
	err = c.Do(ctx, "get_partition "+db+"."+table, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		var err error
		got, err = ms.GetPartition(ctx, db, table, values)
		return err
	})
	var noSuch *hms.NoSuchObjectException
	if errors.As(err, &noSuch) {
		return PartitionInfo{}, false, nil
	}
	if err != nil {
		return PartitionInfo{}, false, fmt.Errorf("hive: get_partition %s.%s %v on %s: %w", db, table, values, c.addr, err)
	}
	return partitionInfo(got), true, nil
}

// Partitions lists every partition of a table.
func (c *Client) Partitions(ctx context.Context, db, table string) ([]PartitionInfo, error) {
	var got []*hms.Partition
	err := c.Do(ctx, "get_partitions "+db+"."+table, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		var err error
		got, err = ms.GetPartitions(ctx, db, table, -1)
		return err
	})
	var noSuch *hms.NoSuchObjectException
	if errors.As(err, &noSuch) {
		return nil, fmt.Errorf("%w: %s.%s on %s: %s", ErrNoSuchTable, db, table, c.addr, noSuch.Message)
	}
	if err != nil {
		return nil, fmt.Errorf("hive: get_partitions %s.%s on %s: %w", db, table, c.addr, err)
	}
	out := make([]PartitionInfo, 0, len(got))
	for _, p := range got {
		out = append(out, partitionInfo(p))
	}
	return out, nil
}
