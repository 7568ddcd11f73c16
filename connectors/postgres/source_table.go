package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// srcTable is what a source knows of its table.
type srcTable struct {
	ident  pgx.Identifier
	name   string // schema.name
	cols   []column
	key    int // index of the key column in cols
	intKey bool
	ident2 string // replica identity: d, n, f, i
}

func (t *srcTable) keyCol() column { return t.cols[t.key] }

// loadSourceTable resolves the table, its columns and its key column.
func loadSourceTable(ctx context.Context, conn *pgx.Conn, name, key string, cdc bool) (*srcTable, error) {
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
	t := &srcTable{ident: pgx.Identifier{schema, rel}, name: schema + "." + rel, ident2: replIdent, key: -1}
	if kind != "r" && kind != "p" {
		return nil, fmt.Errorf("%w: %q is not a table (relkind %q)", ErrTableNotFound, t.name, kind)
	}
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod)
		FROM pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	t.cols, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.oid, &c.typ)
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	if key == "" {
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = $1 AND i.indisprimary`, oid)
		if err != nil {
			return nil, fmt.Errorf("read the primary key of table %s: %w", t.name, err)
		}
		pk, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("read the primary key of table %s: %w", t.name, err)
		}
		switch len(pk) {
		case 0:
			return nil, fmt.Errorf("%w: table %s has no primary key: name a unique, not-null key column with KeyColumn", ErrInvalidConfig, t.name)
		case 1:
			key = pk[0]
		default:
			return nil, fmt.Errorf("%w: table %s has a primary key of %d columns (%s); composite keys are not supported yet: name one unique, not-null column with KeyColumn", ErrInvalidConfig, t.name, len(pk), strings.Join(pk, ", "))
		}
	}
	for i, c := range t.cols {
		if c.name == key {
			t.key = i
		}
	}
	if t.key < 0 {
		return nil, fmt.Errorf("%w: table %s has no column %q (KeyColumn; it has %s)", ErrColumnNotFound, t.name, key, columnList(t.cols))
	}
	switch t.keyCol().oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID:
		t.intKey = true
	}
	if cdc && !t.intKey {
		return nil, fmt.Errorf("%w: the CDC source needs an integer key column (smallint, integer, bigint); key %q of table %s is %s", ErrInvalidConfig, key, t.name, t.keyCol().typ)
	}
	return t, nil
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

// pageSQL reads up to $n rows ordered by key after lo (exclusive) up to
// hi (inclusive), either bound optional.
func (t *srcTable) pageSQL(lo, hi bool) string {
	// Qualified: a bare name in ORDER BY would be the text output column.
	k := "src." + pgx.Identifier{t.keyCol().name}.Sanitize()
	typ := t.keyCol().typ
	var where []string
	arg := 1
	if lo {
		where = append(where, fmt.Sprintf("%s > $%d::text::%s", k, arg, typ))
		arg++
	}
	if hi {
		where = append(where, fmt.Sprintf("%s <= $%d::text::%s", k, arg, typ))
		arg++
	}
	q := "SELECT " + t.selectList() + " FROM " + t.ident.Sanitize() + " AS src"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + fmt.Sprintf(" ORDER BY %s LIMIT $%d", k, arg)
}

// readPage runs a page query and decodes its rows.
func (t *srcTable) readPage(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, lo, hi *string, limit int) (rows []map[string]any, keys []string, err error) {
	args := []any{}
	if lo != nil {
		args = append(args, *lo)
	}
	if hi != nil {
		args = append(args, *hi)
	}
	args = append(args, limit)
	rs, err := q.Query(ctx, t.pageSQL(lo != nil, hi != nil), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", t.name, err)
	}
	defer rs.Close()
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
		rows = append(rows, row)
		keys = append(keys, string(raw[t.key]))
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("read table %s: %w", t.name, err)
	}
	return rows, keys, nil
}

var textMap = pgtype.NewMap()

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
		if err := textMap.Scan(oid, pgtype.TextFormatCode, b, &tm); err != nil {
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
