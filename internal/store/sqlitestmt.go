package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"

	"modernc.org/sqlite"
)

// SQLite's connections keep the statements they prepared: database/sql prepares a query's SQL
// on every call that is not a *sql.Stmt, and parsing it costs SQLite more than running most of
// our statements. Each connection keeps up to maxCachedStmts statements by SQL text (a query
// whose placeholders vary, such as an IN list, is one entry per length) and runs a query again
// through its statement; a statement whose rows are still open is not shared (the call
// prepares its own, as before). SQLite prepares a statement again by itself when the schema
// changed (sqlite3_prepare_v2).

// maxCachedStmts bounds the statements one connection keeps (8 connections: at most 2,048).
const maxCachedStmts = 256

// openSQLite opens the SQLite database at dsn (a file: URI) through modernc.org/sqlite, its
// connections keeping their prepared statements.
func openSQLite(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(stmtCacheConnector{c}), nil
}

// sqliteConn is what modernc.org/sqlite's connections implement and database/sql uses.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// stmtCacheConnector makes connections that keep their statements.
type stmtCacheConnector struct{ driver.Connector }

// Connect opens a connection with an empty statement cache (a driver connection without the
// interfaces the cache needs is returned as it is).
func (c stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		return conn, nil
	}
	return &stmtCacheConn{sqliteConn: sc, stmts: map[string]*cachedStmt{}}, nil
}

// stmtCacheConn is a connection with its statements. database/sql uses a connection from one
// goroutine at a time, so it needs no lock.
type stmtCacheConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
}

// cachedStmt is a prepared statement; busy while rows of it are open.
type cachedStmt struct {
	stmt interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	busy bool
}

// stmt returns the statement of query, preparing it when the connection has none; nil (and no
// error) when the connection's is busy or cannot be kept.
func (c *stmtCacheConn) stmt(ctx context.Context, query string) (*cachedStmt, error) {
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil, nil
		}
		return s, nil
	}
	if len(c.stmts) >= maxCachedStmts {
		for q, s := range c.stmts {
			if !s.busy {
				s.stmt.Close()
				delete(c.stmts, q)
			}
		}
	}
	ds, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		ds.Close()
		return nil, nil
	}
	s := &cachedStmt{stmt: st}
	c.stmts[query] = s
	return s, nil
}

// ExecContext runs query through its kept statement.
func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	return s.stmt.ExecContext(ctx, args)
}

// QueryContext runs query through its kept statement, busy until its rows are closed.
func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, s: s}, nil
}

// Close closes the kept statements and the connection.
func (c *stmtCacheConn) Close() error {
	for q, s := range c.stmts {
		s.stmt.Close()
		delete(c.stmts, q)
	}
	return c.sqliteConn.Close()
}

// cachedRows are the rows of a kept statement, which they free when closed. They pass on the
// column type methods of the driver's rows.
type cachedRows struct {
	driver.Rows
	s *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.s.busy = false
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}
