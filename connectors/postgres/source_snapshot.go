package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// chunks cuts the table into chunks of ChunkSize rows: the keys at rows
// ChunkSize, 2·ChunkSize, … (one ordered scan of the key) bound them.
// Chunk i holds the keys in (bound i-1, bound i]; the first starts at the
// first key, the last ends at the last.
func (s *pgSource[T]) chunks(ctx context.Context, conn *pgx.Conn, t *srcTable) ([]Split, error) {
	k := pgx.Identifier{t.keyCol().name}.Sanitize()
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT k FROM (SELECT %s::text AS k, %s AS o, row_number() OVER (ORDER BY %s) AS rn FROM %s) s
		WHERE rn %% $1 = 0 ORDER BY o`, k, k, k, t.ident.Sanitize()), s.cfg.chunkSize)
	if err != nil {
		return nil, fmt.Errorf("postgres source: compute the chunks of table %s: %w", t.name, err)
	}
	bounds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres source: compute the chunks of table %s: %w", t.name, err)
	}
	splits := make([]Split, 0, len(bounds)+1)
	var lo *string
	for i := 0; i <= len(bounds); i++ {
		sp := Split{ID: "chunk-" + strconv.Itoa(i), Lo: lo}
		if i < len(bounds) {
			hi := bounds[i]
			sp.Hi = &hi
			lo = clonePtr(&hi)
		}
		splits = append(splits, sp)
	}
	s.cfg.logger.Info("postgres source: snapshot chunks", "table", t.name, "chunks", len(splits))
	return splits, nil
}
