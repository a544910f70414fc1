package room

import (
	"context"
	"database/sql"
	"sync"
)

// Parsing SQL is a large share of a small command's cost with an in-process
// SQLite, so each distinct query is prepared once and reused. The writer's
// connection gets a ConnQuerier (one goroutine, no lock); read transactions
// get a TxQuerier over statements prepared once on the read pool.

// ConnQuerier is a Querier on one connection with a statement cache. It is
// used by a single goroutine (the room's writer).
type ConnQuerier struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

// NewConnQuerier wraps the writer's connection.
func NewConnQuerier(conn *sql.Conn) *ConnQuerier {
	return &ConnQuerier{conn: conn, stmts: map[string]*sql.Stmt{}}
}

func (c *ConnQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := c.stmts[query]; ok {
		return st
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil // the direct call below reports the error
	}
	c.stmts[query] = st
	return st
}

// ExecContext runs a statement, prepared once.
func (c *ConnQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.conn.ExecContext(ctx, query, args...)
}

// QueryContext runs a query, prepared once.
func (c *ConnQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a one-row query, prepared once.
func (c *ConnQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.conn.QueryRowContext(ctx, query, args...)
}

// Close releases the prepared statements.
func (c *ConnQuerier) Close() {
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}

// StmtCache holds statements prepared on a pool; database/sql prepares each
// on a pooled connection the first time that connection runs it.
type StmtCache struct {
	db    *sql.DB
	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

// NewStmtCache caches statements for db.
func NewStmtCache(db *sql.DB) *StmtCache { return &StmtCache{db: db, stmts: map[string]*sql.Stmt{}} }

func (c *StmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st := c.stmts[query]
	c.mu.RUnlock()
	if st != nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[query]; st != nil {
		return st
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.stmts[query] = st
	return st
}

// Close releases every statement.
func (c *StmtCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}

// TxQuerier is a read transaction that runs cached statements.
type TxQuerier struct {
	Tx    *sql.Tx
	cache *StmtCache
}

// Querier returns a Querier for a transaction on the cache's pool.
func (c *StmtCache) Querier(tx *sql.Tx) *TxQuerier { return &TxQuerier{Tx: tx, cache: c} }

// ExecContext runs a statement in the transaction.
func (t *TxQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.cache.get(ctx, query); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (t *TxQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.cache.get(ctx, query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a one-row query in the transaction.
func (t *TxQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.cache.get(ctx, query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}
