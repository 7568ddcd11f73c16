package postgres_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-io/sluice/connectors/postgres"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// ExampleNewCDCSource reads a table and then its changes: two rows from
// the snapshot, then an update, a delete and an insert from the
// replication slot, in Debezium's letters. It needs a server: run
// `eval "$(scripts/postgres.sh start)"; export SLUICE_POSTGRES_URL SLUICE_POSTGRES_RUN`
// (TestExampleCDC runs it there).
func ExampleNewCDCSource() {
	url := os.Getenv("SLUICE_POSTGRES_URL")
	if url == "" {
		fmt.Println("set SLUICE_POSTGRES_URL")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(context.Background())
	exec := func(sql string) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			fmt.Println(err)
		}
	}
	exec(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'example_cdc'`)
	exec(`DROP PUBLICATION IF EXISTS example_cdc`)
	exec(`DROP TABLE IF EXISTS example_accounts`)
	exec(`CREATE TABLE example_accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL)`)
	exec(`ALTER TABLE example_accounts REPLICA IDENTITY FULL`) // full before images
	exec(`INSERT INTO example_accounts VALUES (1, 'ann', 10), (2, 'bob', 20)`)
	// When the job is gone for good, drop the slot: it holds WAL on the server.
	defer exec(`DROP PUBLICATION example_cdc`)
	defer exec(`SELECT pg_drop_replication_slot('example_cdc')`)

	src, err := postgres.NewCDCSource(url, "example_accounts",
		postgres.Slot("example_cdc"), postgres.Publication("example_cdc"),
		postgres.CreateSlot(true), postgres.CreatePublication(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	store := testsink.NewStore[postgres.Change]()
	env := stream.New(stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[postgres.Change](), "accounts"), testsink.NewTwoPhase(store), "out")
	job, err := env.Start(ctx, "accounts-cdc")
	if err != nil {
		fmt.Println(err)
		return
	}
	waitFor := func(n int) {
		for i := 0; i < 1000 && len(store.Committed()) < n; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(2) // the snapshot
	exec(`UPDATE example_accounts SET balance = balance + 5 WHERE id = 1`)
	exec(`DELETE FROM example_accounts WHERE id = 2`)
	exec(`INSERT INTO example_accounts VALUES (3, 'cy', 30)`)
	waitFor(5)
	job.Cancel()
	_, _ = job.Wait()
	for _, c := range store.Committed() {
		fmt.Println(c.Op, c.Key, c.Before["balance"], c.After["balance"])
	}
}

// TestExampleCDC runs ExampleNewCDCSource on the real server and checks
// what it prints.
func TestExampleCDC(t *testing.T) {
	if os.Getenv("SLUICE_POSTGRES_URL") == "" {
		t.Skip("SLUICE_POSTGRES_URL is not set")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	ExampleNewCDCSource()
	os.Stdout = stdout
	w.Close()
	out := string(<-done)
	want := "r 1 <nil> 10\nr 2 <nil> 20\nu 1 10 15\nd 2 20 <nil>\nc 3 <nil> 30\n"
	if out != want {
		t.Errorf("ExampleNewCDCSource printed\n%s\nwant\n%s", out, want)
	}
}
