package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// srcTable is what a source knows of its table.
type srcTable struct {
	ident  pgx.Identifier
	name   string // schema.name
	cols   []column
	keys   []keyCol // the key columns, in key order
	ident2 string   // replica identity: d, n, f, i
}

// keyCol is a column of the key.
type keyCol struct {
	column
	idx       int    // index in cols
	collation string // the column's collation, "" for a type without one
}

// loadSourceTable resolves the table, its columns and its key columns
// (key; empty: the primary key's).
func loadSourceTable(ctx context.Context, conn *pgx.Conn, name string, key []string) (*srcTable, error) {
	var oid uint32
	var schema, rel, kind, replIdent string
	err := conn.QueryRow(ctx, `SELECT c.oid, n.nspname, c.relname, c.relkind::text, c.relreplident::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = to_regclass($1)`, name).Scan(&oid, &schema, &rel, &kind, &replIdent)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: table %q does not exist (or the source's user cannot see it)", ErrTableNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("look up table %q: %w", name, err)
	}
	t := &srcTable{ident: pgx.Identifier{schema, rel}, name: schema + "." + rel, ident2: replIdent}
	if kind != "r" && kind != "p" {
		return nil, fmt.Errorf("%w: %q is not a table (relkind %q)", ErrTableNotFound, t.name, kind)
	}
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.attnotnull, coalesce(co.collname, '')
		FROM pg_attribute a LEFT JOIN pg_collation co ON co.oid = a.attcollation
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	type colInfo struct {
		column
		notNull   bool
		collation string
	}
	infos, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (colInfo, error) {
		var c colInfo
		return c, r.Scan(&c.name, &c.oid, &c.typ, &c.notNull, &c.collation)
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	for _, c := range infos {
		t.cols = append(t.cols, c.column)
	}
	if len(key) == 0 {
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index i
			CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, pos)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
			WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.pos`, oid)
		if err != nil {
			return nil, fmt.Errorf("read the primary key of table %s: %w", t.name, err)
		}
		if key, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("read the primary key of table %s: %w", t.name, err)
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: table %s has no primary key: name unique, not-null key columns with KeyColumns", ErrInvalidConfig, t.name)
		}
	}
	for _, k := range key {
		i := slices.IndexFunc(infos, func(c colInfo) bool { return c.name == k })
		if i < 0 {
			return nil, fmt.Errorf("%w: table %s has no column %q (KeyColumns; it has %s)", ErrColumnNotFound, t.name, k, columnList(t.cols))
		}
		if !infos[i].notNull {
			return nil, fmt.Errorf("%w: key column %q of table %s may be NULL: the source orders the table by its key, and a row with a NULL key would be skipped; name NOT NULL columns (KeyColumns) or ALTER TABLE %s ALTER COLUMN %s SET NOT NULL",
				ErrInvalidConfig, k, t.name, t.ident.Sanitize(), pgx.Identifier{k}.Sanitize())
		}
		t.keys = append(t.keys, keyCol{column: infos[i].column, idx: i, collation: infos[i].collation})
	}
	return t, nil
}

// keyNames is the key columns' names, for messages.
func (t *srcTable) keyNames() string { return strings.Join(t.keyColumns(), ", ") }

// keyColumns is the names of the key columns, in key order.
func (t *srcTable) keyColumns() []string {
	names := make([]string, len(t.keys))
	for i, k := range t.keys {
		names[i] = k.name
	}
	return names
}

// checkKey fails if sp's positions are of other key columns than the
// table's key (the key option changed since the checkpoint).
func (t *srcTable) checkKey(sp *Split) error {
	if sp.Key == nil || slices.Equal(sp.Key, t.keyColumns()) {
		return nil
	}
	return fmt.Errorf("%w: postgres source: split %s of table %s holds positions of key (%s), but the source's key is now (%s): positions are key values, so a job restores only with the key it was checkpointed with; set the key back to (%s), or start afresh (without --from)",
		ErrInvalidConfig, sp.ID, t.name, strings.Join(sp.Key, ", "), t.keyNames(), strings.Join(sp.Key, ", "))
}

// selectList is the columns as text, for a query.
func (t *srcTable) selectList() string {
	var b strings.Builder
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c.name}.Sanitize())
		b.WriteString("::text")
	}
	return b.String()
}

// keyExpr is the key as a row value of the table's columns: "src.a" or
// "(src.a, src.b)". Qualified: a bare name in ORDER BY would be the text
// output column.
func (t *srcTable) keyExpr() string {
	parts := make([]string, len(t.keys))
	for i, k := range t.keys {
		parts[i] = "src." + pgx.Identifier{k.name}.Sanitize()
	}
	return rowOf(parts)
}

// keyParams is the key as a row value of text parameters $first, …, cast
// to the key columns' types (with their collations, when colls is set).
func (t *srcTable) keyParams(first int, colls bool) string {
	parts := make([]string, len(t.keys))
	for i, k := range t.keys {
		parts[i] = fmt.Sprintf("$%d::text::%s", first+i, k.typ)
		if colls && k.collation != "" {
			parts[i] = "(" + parts[i] + ") COLLATE " + pgx.Identifier{k.collation}.Sanitize()
		}
	}
	return rowOf(parts)
}

func rowOf(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// pageSQL reads up to $n rows ordered by key after lo (exclusive) up to
// hi (inclusive), either bound optional. Composite keys compare as row
// values, (a, b) > ($1, $2), so the order is the server's, with each
// column's collation.
func (t *srcTable) pageSQL(lo, hi bool) string {
	k := t.keyExpr()
	var where []string
	arg := 1
	if lo {
		where = append(where, fmt.Sprintf("%s > %s", k, t.keyParams(arg, false)))
		arg += len(t.keys)
	}
	if hi {
		where = append(where, fmt.Sprintf("%s <= %s", k, t.keyParams(arg, false)))
		arg += len(t.keys)
	}
	q := "SELECT " + t.selectList() + " FROM " + t.ident.Sanitize() + " AS src"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	order := strings.TrimSuffix(strings.TrimPrefix(k, "("), ")")
	return q + fmt.Sprintf(" ORDER BY %s LIMIT $%d", order, arg)
}

// encodeKey is the stored form of a key (a position, a chunk bound): the
// text form of a one-column key as it is, a JSON array of the columns'
// text forms for a composite key.
func (t *srcTable) encodeKey(parts []string) string {
	if len(t.keys) == 1 {
		return parts[0]
	}
	b, _ := json.Marshal(parts)
	return string(b)
}

// decodeKey is the inverse of encodeKey.
func (t *srcTable) decodeKey(s string) ([]string, error) {
	if len(t.keys) == 1 {
		return []string{s}, nil
	}
	var parts []string
	if err := json.Unmarshal([]byte(s), &parts); err != nil || len(parts) != len(t.keys) {
		return nil, fmt.Errorf("%w: stored key %q is not a key of columns (%s) of table %s (was the key changed since the checkpoint?)", ErrInvalidConfig, s, t.keyNames(), t.name)
	}
	return parts, nil
}

// keyValue is a Change's Key: the key column's value, or the key columns'
// values in key order ([]any) for a composite key.
func (t *srcTable) keyValue(row map[string]any) any {
	if len(t.keys) == 1 {
		return row[t.keys[0].name]
	}
	v := make([]any, len(t.keys))
	for i, k := range t.keys {
		v[i] = row[k.name]
	}
	return v
}

// readPage runs a page query and decodes its rows; keys are their keys,
// encoded (encodeKey).
func (t *srcTable) readPage(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, lo, hi *string, limit int) (rows []map[string]any, keys []string, err error) {
	args := []any{}
	for _, b := range []*string{lo, hi} {
		if b == nil {
			continue
		}
		parts, err := t.decodeKey(*b)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range parts {
			args = append(args, p)
		}
	}
	args = append(args, limit)
	rs, err := q.Query(ctx, t.pageSQL(lo != nil, hi != nil), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", t.name, err)
	}
	defer rs.Close()
	parts := make([]string, len(t.keys))
	for rs.Next() {
		raw := rs.RawValues()
		row := make(map[string]any, len(t.cols))
		for i, c := range t.cols {
			if raw[i] == nil {
				row[c.name] = nil
				continue
			}
			v, err := decodeText(c.oid, raw[i])
			if err != nil {
				return nil, nil, fmt.Errorf("table %s column %q (%s) value %q: %w", t.name, c.name, c.typ, raw[i], err)
			}
			row[c.name] = v
		}
		for i, k := range t.keys {
			parts[i] = string(raw[k.idx])
		}
		rows = append(rows, row)
		keys = append(keys, t.encodeKey(parts))
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", t.name, err)
	}
	return rows, keys, nil
}

// textMap scans the text form of timestamps and dates. It is made on
// first use: pgtype.NewMap builds pgx's default type map (about 150 KiB)
// the first time it is called, which at package initialisation every
// process paid at start-up, with or without a PostgreSQL connector.
var textMap = sync.OnceValue(pgtype.NewMap)

// decodeText turns a value in PostgreSQL's text form into a value of the
// CLI's value contract (see [Change]).
func decodeText(oid uint32, b []byte) (any, error) {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		return strconv.ParseInt(string(b), 10, 64)
	case pgtype.Float4OID, pgtype.Float8OID:
		return strconv.ParseFloat(string(b), 64)
	case pgtype.NumericOID:
		s := string(b)
		if s == "NaN" || strings.Contains(s, "Infinity") {
			return s, nil
		}
		return json.Number(s), nil
	case pgtype.BoolOID:
		switch string(b) {
		case "t", "true":
			return true, nil
		case "f", "false":
			return false, nil
		}
		return nil, fmt.Errorf("not a boolean")
	case pgtype.ByteaOID:
		s, ok := strings.CutPrefix(string(b), `\x`)
		if !ok {
			return nil, fmt.Errorf("bytea not in hex form")
		}
		return hex.DecodeString(s)
	case pgtype.TimestampOID, pgtype.TimestamptzOID, pgtype.DateOID:
		var tm time.Time
		if err := textMap().Scan(oid, pgtype.TextFormatCode, b, &tm); err != nil {
			return string(b), nil // infinity and the like: as text
		}
		return tm, nil
	case pgtype.JSONOID, pgtype.JSONBOID:
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return string(b), nil
}
