package postgres_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/postgres"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

type order struct {
	ID     int64
	Amount float64
}

// Example writes generated orders into a table exactly once: each
// checkpoint's rows in one prepared transaction per subtask, committed
// when the checkpoint completes. It needs a server: run
// `eval "$(scripts/postgres.sh start)"; export SLUICE_POSTGRES_URL SLUICE_POSTGRES_RUN`
// (TestExample runs it there).
func Example() {
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
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS example_orders; CREATE TABLE example_orders (id bigint PRIMARY KEY, amount numeric NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}

	sk, err := postgres.NewSink(url, "example_orders",
		func(o order) ([]any, error) { return []any{o.ID, o.Amount}, nil },
		postgres.Columns("id", "amount"),
		postgres.DeliveryGuarantee(postgres.ExactlyOnce)) // the default
	if err != nil {
		fmt.Println(err)
		return
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(100*time.Millisecond),
		stream.Logger(stream.DiscardLogger()))
	orders := stream.FromSource(env,
		datagen.New(func(i int64) order { return order{ID: i, Amount: float64(i) * 1.5} }, datagen.Count(1000), datagen.Splits(2)),
		watermark.None[order](), "orders")
	stream.SinkTo(orders, sk, "postgres")
	if _, err := env.Execute(ctx, "orders-to-postgres"); err != nil {
		fmt.Println(err)
		return
	}

	var n int64
	var sum float64
	if err := conn.QueryRow(ctx, "SELECT count(*), sum(amount)::float8 FROM example_orders").Scan(&n, &sum); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n, "orders, total", sum)
}

// TestExample runs Example on the real server and checks what it prints
// (an Example without an output comment is only compiled: its output
// depends on the server being there).
func TestExample(t *testing.T) {
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
	Example()
	os.Stdout = stdout
	w.Close()
	out := string(<-done)
	if want := "1000 orders, total 749250\n"; out != want {
		t.Errorf("Example printed %q, want %q", out, want)
	}
}
