package hive_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/hive"
)

// Example registers two partitions of a file sink's output in a
// metastore table partitioned by dt and hr, commits one of them again (as a
// restarted job does) and lists the table's partitions. It runs against a
// small in-process stand-in for a metastore that serves the four Thrift
// calls the committer makes; pass a real metastore's address
// ("127.0.0.1:9083") the same way.
func Example() {
	ms, err := startFakeMetastore()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ms.stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, err := hive.NewPartitionCommitter(ctx, ms.addr, "web", "clicks", hive.WithPartitionKeys("dt", "hr"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pc.(*hive.Committer).Close()

	for _, hr := range []string{"13", "14", "13"} {
		p := file.Partition{
			Path:     "dt=2026-11-30/hr=" + hr,
			Location: "/data/clicks/dt=2026-11-30/hr=" + hr,
			Values:   []file.PartitionValue{{Name: "dt", Value: "2026-11-30"}, {Name: "hr", Value: hr}},
		}
		if err := pc.CommitPartition(ctx, p); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, p := range ms.list() {
		fmt.Println(p)
	}
	// Output:
	// [2026-11-30 13] at /data/clicks/dt=2026-11-30/hr=13
	// [2026-11-30 14] at /data/clicks/dt=2026-11-30/hr=14
}

// fakeMetastore serves get_table_req, add_partition, get_partition and
// alter_partition for one table, web.clicks, partitioned by dt and hr.
// Any other call panics (the embedded interface is nil).
type fakeMetastore struct {
	hms.ThriftHiveMetastore
	addr   string
	server *thrift.TSimpleServer
	done   chan struct{}

	mu    sync.Mutex
	parts map[string]*hms.Partition // by values
	order []string
}

func startFakeMetastore() (*fakeMetastore, error) {
	f := &fakeMetastore{parts: map[string]*hms.Partition{}, done: make(chan struct{})}
	sock, err := thrift.NewTServerSocket("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := sock.Listen(); err != nil {
		return nil, err
	}
	f.addr = sock.Addr().String()
	f.server = thrift.NewTSimpleServer4(hms.NewThriftHiveMetastoreProcessor(f), sock,
		thrift.NewTBufferedTransportFactory(8192), thrift.NewTBinaryProtocolFactoryConf(nil))
	go func() {
		defer close(f.done)
		_ = f.server.Serve()
	}()
	return f, nil
}

func (f *fakeMetastore) stop() {
	_ = f.server.Stop()
	<-f.done
}

func (f *fakeMetastore) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, k := range f.order {
		p := f.parts[k]
		out = append(out, fmt.Sprintf("%v at %s", p.Values, p.Sd.Location))
	}
	return out
}

func (f *fakeMetastore) GetTableReq(_ context.Context, req *hms.GetTableRequest) (*hms.GetTableResult_, error) {
	if req.DbName != "web" || req.TblName != "clicks" {
		return nil, &hms.NoSuchObjectException{Message: req.DbName + "." + req.TblName + " table not found"}
	}
	t := hms.NewTable()
	t.DbName, t.TableName, t.TableType = "web", "clicks", "EXTERNAL_TABLE"
	t.PartitionKeys = []*hms.FieldSchema{{Name: "dt", Type: "string"}, {Name: "hr", Type: "string"}}
	t.Sd = hms.NewStorageDescriptor()
	t.Sd.Location = "/data/clicks"
	return &hms.GetTableResult_{Table: t}, nil
}

func (f *fakeMetastore) AddPartition(_ context.Context, p *hms.Partition) (*hms.Partition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fmt.Sprint(p.Values)
	if _, ok := f.parts[k]; ok {
		return nil, &hms.AlreadyExistsException{Message: "Partition already exists"}
	}
	f.parts[k] = p
	f.order = append(f.order, k)
	return p, nil
}

func (f *fakeMetastore) GetPartition(_ context.Context, _, _ string, vals []string) (*hms.Partition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.parts[fmt.Sprint(vals)]
	if !ok {
		return nil, &hms.NoSuchObjectException{Message: "partition not found"}
	}
	return p, nil
}

func (f *fakeMetastore) AlterPartition(_ context.Context, _, _ string, p *hms.Partition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parts[fmt.Sprint(p.Values)] = p
	return nil
}
