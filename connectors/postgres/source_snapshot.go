package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// chunks cuts the table into chunks of ChunkSize rows: the keys at rows
// ChunkSize, 2·ChunkSize, … (one ordered scan of the key) bound them.
// Chunk i holds the keys in (bound i-1, bound i]; the first starts at the
// first key, the last ends at the last.
func (s *pgSource[T]) chunks(ctx context.Context, conn *pgx.Conn, t *srcTable) ([]Split, error) {
	k := t.keyExpr()
	order := strings.TrimSuffix(strings.TrimPrefix(k, "("), ")")
	sel := make([]string, len(t.keys))
	for i, kc := range t.keys {
		sel[i] = "src." + pgx.Identifier{kc.name}.Sanitize() + "::text"
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT %s FROM (SELECT %s, row_number() OVER (ORDER BY %s) AS rn FROM %s AS src) src
		WHERE rn %% $1 = 0 ORDER BY rn`, pgListOf("k", len(t.keys)), aliased(sel, "k"), order, t.ident.Sanitize()), s.cfg.chunkSize)
	if err != nil {
		return nil, fmt.Errorf("postgres source: compute the chunks of table %s: %w", t.name, err)
	}
	bounds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		parts := make([]string, len(t.keys))
		ptrs := make([]any, len(parts))
		for i := range parts {
			ptrs[i] = &parts[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return "", err
		}
		return t.encodeKey(parts), nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres source: compute the chunks of table %s: %w", t.name, err)
	}
	splits := make([]Split, 0, len(bounds)+1)
	var lo *string
	for i := 0; i <= len(bounds); i++ {
		sp := Split{ID: "chunk-" + strconv.Itoa(i), Lo: lo, Key: t.keyColumns()}
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

// pgListOf is "p0, p1, …" (n names).
func pgListOf(p string, n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = p + strconv.Itoa(i)
	}
	return strings.Join(names, ", ")
}

// aliased is "e0 AS p0, e1 AS p1, …".
func aliased(exprs []string, p string) string {
	out := make([]string, len(exprs))
	for i, e := range exprs {
		out[i] = e + " AS " + p + strconv.Itoa(i)
	}
	return strings.Join(out, ", ")
}
