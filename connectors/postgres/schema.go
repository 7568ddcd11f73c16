package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrTableNotFound is wrapped by the error of a sink whose table does not
// exist; ErrColumnNotFound by one that names a column the table lacks.
var (
	ErrTableNotFound  = errors.New("postgres: table not found")
	ErrColumnNotFound = errors.New("postgres: column not found")
)

// column is one column of the target table.
type column struct {
	name      string
	oid       uint32
	typ       string // format_type
	generated bool
	identity  bool // GENERATED ALWAYS AS IDENTITY
}

// table is what the schema check learned about the target table.
type table struct {
	ident   pgx.Identifier // schema, name
	name    string         // schema.name, for messages
	cols    []column       // the sink's columns, in its order
	key     []string       // Upsert's conflict columns
	insert  string         // the upsert statement
	colsIdx map[string]int // column name → index in cols
}

// loadTable resolves name, checks that every column of cfg exists, is
// writable and has a type the connection can encode, and (Upsert) that
// the key columns have a unique index. ctx bounds the queries.
func loadTable(ctx context.Context, conn *pgx.Conn, name string, cfg *sinkConfig) (*table, error) {
	var oid uint32
	var schema, rel, kind string
	err := conn.QueryRow(ctx, `SELECT c.oid, n.nspname, c.relname, c.relkind::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = to_regclass($1)`, name).Scan(&oid, &schema, &rel, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: table %q does not exist (or the sink's user cannot see it)", ErrTableNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("look up table %q: %w", name, err)
	}
	t := &table{ident: pgx.Identifier{schema, rel}, name: schema + "." + rel, colsIdx: map[string]int{}}
	if kind != "r" && kind != "p" {
		return nil, fmt.Errorf("%w: %q is not a table (relkind %q)", ErrTableNotFound, t.name, kind)
	}
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod), a.attgenerated <> '', a.attidentity = 'a'
		FROM pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.oid, &c.typ, &c.generated, &c.identity)
	})
	if err != nil {
		return nil, fmt.Errorf("read the columns of table %s: %w", t.name, err)
	}
	byName := map[string]column{}
	for _, c := range all {
		byName[c.name] = c
	}
	names := cfg.columns
	if len(names) == 0 {
		for _, c := range all {
			if !c.generated && !c.identity {
				names = append(names, c.name)
			}
		}
	}
	for _, n := range names {
		c, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%w: table %s has no column %q (it has %s)", ErrColumnNotFound, t.name, n, columnList(all))
		}
		if c.generated {
			return nil, fmt.Errorf("%w: column %q of table %s is generated and cannot be written", ErrInvalidConfig, n, t.name)
		}
		if _, ok := conn.TypeMap().TypeForOID(c.oid); !ok {
			// Enums, domains, composites and arrays of them: register them.
			typ, err := conn.LoadType(ctx, c.typ)
			if err != nil {
				return nil, fmt.Errorf("%w: column %q of table %s has type %s, which the sink cannot encode: %w", ErrInvalidConfig, n, t.name, c.typ, err)
			}
			conn.TypeMap().RegisterType(typ)
		}
		t.colsIdx[n] = len(t.cols)
		t.cols = append(t.cols, c)
	}
	if cfg.mode == Upsert {
		if err := t.loadKey(ctx, conn, oid, cfg.key); err != nil {
			return nil, err
		}
		t.insert = t.upsertSQL()
	}
	return t, nil
}

func columnList(cols []column) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", c.name, c.typ)
	}
	return b.String()
}

// loadKey sets the conflict columns: key, or the primary key; they must be
// exactly the columns of a unique index (ON CONFLICT needs one) and among
// the sink's columns.
func (t *table) loadKey(ctx context.Context, conn *pgx.Conn, oid uint32, key []string) error {
	rows, err := conn.Query(ctx, `SELECT i.indisprimary,
		array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
		FROM pg_index i WHERE i.indrelid = $1 AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL`, oid)
	if err != nil {
		return fmt.Errorf("read the unique indexes of table %s: %w", t.name, err)
	}
	type index struct {
		primary bool
		cols    []string
	}
	idx, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var i index
		return i, r.Scan(&i.primary, &i.cols)
	})
	if err != nil {
		return fmt.Errorf("read the unique indexes of table %s: %w", t.name, err)
	}
	if len(key) == 0 {
		for _, i := range idx {
			if i.primary {
				key = i.cols
			}
		}
		if len(key) == 0 {
			return fmt.Errorf("%w: Upsert into table %s: the table has no primary key; set Key to the columns of a unique index", ErrInvalidConfig, t.name)
		}
	}
	found := false
	for _, i := range idx {
		if len(i.cols) == len(key) && !slices.ContainsFunc(key, func(k string) bool { return !slices.Contains(i.cols, k) }) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: Upsert into table %s: no primary key or unique index on exactly the key columns %q (ON CONFLICT needs one)", ErrInvalidConfig, t.name, key)
	}
	for _, k := range key {
		if _, ok := t.colsIdx[k]; !ok {
			return fmt.Errorf("%w: Upsert into table %s: key column %q is not among the sink's columns", ErrInvalidConfig, t.name, k)
		}
	}
	if len(key) == len(t.cols) {
		return fmt.Errorf("%w: Upsert into table %s: every column is a key column; nothing to update (use Append)", ErrInvalidConfig, t.name)
	}
	t.key = key
	return nil
}

// upsertSQL is INSERT INTO t (cols) VALUES ($1…) ON CONFLICT (key) DO
// UPDATE SET col = EXCLUDED.col for every other column.
func (t *table) upsertSQL() string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(t.ident.Sanitize())
	b.WriteString(" (")
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c.name}.Sanitize())
	}
	b.WriteString(") VALUES (")
	for i := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i+1)
	}
	b.WriteString(") ON CONFLICT (")
	for i, k := range t.key {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{k}.Sanitize())
	}
	b.WriteString(") DO UPDATE SET ")
	first := true
	for _, c := range t.cols {
		if slices.Contains(t.key, c.name) {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		q := pgx.Identifier{c.name}.Sanitize()
		b.WriteString(q + " = EXCLUDED." + q)
	}
	return b.String()
}

func (t *table) columnNames() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.name
	}
	return out
}
