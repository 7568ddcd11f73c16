package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for SQL catalogs on PostgreSQL
	_ "modernc.org/sqlite"             // database/sql driver "sqlite" (pure Go) for SQL catalogs on SQLite
)

// Catalog opens a connection to an Iceberg catalog. The sink calls it once
// per writer and once for the global committer, and closes what it returns
// (if it implements io.Closer) when they close.
type Catalog func(ctx context.Context) (catalog.Catalog, error)

// SQLCatalog is Iceberg's SQL (JDBC-style) catalog, as PyIceberg's
// SqlCatalog and Java's JdbcCatalog keep it: the tables
// iceberg_tables and iceberg_namespace_properties in a database, created
// when missing. dsn is a SQLite database file ("/path/catalog.db", or a
// "file:" URI; the sink adds a busy timeout and WAL journaling when the
// URI sets no _pragma) or a PostgreSQL URL ("postgres://…", through pgx).
// name is the catalog's name (its rows' catalog_name; PyIceberg's default
// is "default"). warehouse is where new tables go (a directory, file:// or
// s3:// URL; a directory becomes a file:// URL). props are more catalog
// properties, such as s3.endpoint and s3.force-virtual-addressing for an S3
// warehouse (nil = none).
func SQLCatalog(name, dsn, warehouse string, props map[string]string) Catalog {
	return func(ctx context.Context) (catalog.Catalog, error) {
		driver, dialect, source, err := sqlSource(dsn)
		if err != nil {
			return nil, err
		}
		p := iceberg.Properties(maps.Clone(props))
		if p == nil {
			p = iceberg.Properties{}
		}
		if warehouse != "" {
			w, err := WarehouseURL(warehouse)
			if err != nil {
				return nil, err
			}
			p["warehouse"] = w
		}
		db, err := sql.Open(driver, source)
		if err != nil {
			return nil, fmt.Errorf("iceberg: open the SQL catalog database: %w", err)
		}
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("iceberg: connect to the SQL catalog database: %w", err)
		}
		c, err := sqlcat.NewCatalog(name, db, dialect, p)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("iceberg: SQL catalog: %w", err)
		}
		return &ownedSQL{Catalog: c, db: db}, nil
	}
}

// ownedSQL closes the database the catalog was opened on with it.
type ownedSQL struct {
	*sqlcat.Catalog
	db *sql.DB
}

func (c *ownedSQL) Close() error { return errors.Join(c.Catalog.Close(), c.db.Close()) }

// sqlSource picks the database/sql driver and the catalog's dialect for
// dsn.
func sqlSource(dsn string) (driver string, dialect sqlcat.SupportedDialect, source string, err error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "pgx", sqlcat.Postgres, dsn, nil
	case dsn == "":
		return "", "", "", fmt.Errorf("%w: SQL catalog: empty database (want a SQLite file or a postgres:// URL)", ErrInvalidConfig)
	case strings.Contains(dsn, "://") && !strings.HasPrefix(dsn, "file:"):
		return "", "", "", fmt.Errorf("%w: SQL catalog %q: want a SQLite file or a postgres:// URL", ErrInvalidConfig, redactURL(dsn))
	}
	src := dsn
	if !strings.HasPrefix(src, "file:") {
		src = "file:" + src
	}
	if !strings.Contains(src, "_pragma=") {
		sep := "?"
		if strings.Contains(src, "?") {
			sep = "&"
		}
		src += sep + "_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	}
	return "sqlite", sqlcat.SQLite, src, nil
}

// redactURL drops a URL's password, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// RESTCatalog is an Iceberg REST catalog at uri (http://…/ up to the
// version prefix, e.g. "http://127.0.0.1:8181"). warehouse is sent as the
// warehouse the server should use ("" = the server's default). props are
// more properties, passed as the catalog's properties (credential, token,
// s3.* for the file IO; nil = none); "credential" (client_id:secret) and
// "token" are used for authentication when set.
func RESTCatalog(name, uri, warehouse string, props map[string]string) Catalog {
	return func(ctx context.Context) (catalog.Catalog, error) {
		var opts []rest.Option
		p := iceberg.Properties{}
		for k, v := range props {
			switch k {
			case "credential":
				opts = append(opts, rest.WithCredential(v))
			case "token":
				opts = append(opts, rest.WithOAuthToken(v))
			default:
				p[k] = v
			}
		}
		if warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(warehouse))
		}
		if len(p) > 0 {
			opts = append(opts, rest.WithAdditionalProps(p))
		}
		c, err := rest.NewCatalog(ctx, name, uri, opts...)
		if err != nil {
			return nil, fmt.Errorf("iceberg: REST catalog %s: %w", redactURL(uri), err)
		}
		return c, nil
	}
}

// WarehouseURL turns a warehouse given as a directory into a file:// URL
// (absolute); URLs (file://, s3://, …) are returned as they are.
func WarehouseURL(w string) (string, error) {
	if strings.Contains(w, "://") {
		return strings.TrimSuffix(w, "/"), nil
	}
	abs, err := filepath.Abs(w)
	if err != nil {
		return "", fmt.Errorf("%w: warehouse %q: %w", ErrInvalidConfig, w, err)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// ParseIdentifier splits "ns.table" or "ns1.ns2.table" into a table
// identifier; it needs a namespace.
func ParseIdentifier(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%w: table %q: want namespace.table", ErrInvalidConfig, s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: table %q: empty name part", ErrInvalidConfig, s)
		}
	}
	return parts, nil
}

// closeCatalog closes c if it can be closed.
func closeCatalog(c catalog.Catalog) error {
	if cl, ok := c.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// loadOrCreate loads the table, creating it (and its namespace) first
// when it is missing and create is set. Several writers may race to
// create it: the losers load the winner's table. A missing table to be
// created from the first record's columns (create.infer, no columns
// yet) is a nil table and no error.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, ident table.Identifier, create *createSpec) (*table.Table, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) && !errors.Is(err, catalog.ErrNoSuchNamespace) || create == nil {
		return nil, fmt.Errorf("iceberg: load table %s: %w", strings.Join(ident, "."), err)
	}
	if create.infer && create.columns == nil {
		return nil, nil
	}
	ns := catalog.NamespaceFromIdent(ident)
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("iceberg: create namespace %s: %w", strings.Join(ns, "."), err)
	}
	sc, err := schemaOf(create.columns)
	if err != nil {
		return nil, err
	}
	spec, err := specOf(create.partition, sc)
	if err != nil {
		return nil, err
	}
	opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&spec)}
	if len(create.props) > 0 {
		opts = append(opts, catalog.WithProperties(create.props))
	}
	if create.location != "" {
		loc, err := WarehouseURL(create.location)
		if err != nil {
			return nil, err
		}
		opts = append(opts, catalog.WithLocation(loc))
	}
	tbl, err = cat.CreateTable(ctx, ident, sc, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		tbl, err = cat.LoadTable(ctx, ident)
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: create table %s: %w", strings.Join(ident, "."), err)
	}
	return tbl, nil
}
