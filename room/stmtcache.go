package room

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// Parsing SQL is a large share of a small command's cost with an in-process
// SQLite, so each distinct query is prepared once and reused. The writer's
// connection gets a ConnQuerier (one goroutine, no lock); read transactions
// get a TxQuerier over statements prepared once on the read pool.

// ConnQuerier is a Querier on one connection with a statement cache. It is
// used by a single goroutine (the room's writer).
type ConnQuerier struct {
	conn       *sql.Conn
	stmts      map[string]*sql.Stmt
	statements *atomic.Uint64
}

// NewConnQuerier wraps the writer's connection. Every statement it runs is
// counted into statements (when not nil), so the writer's cost per command
// can be read in statements, which does not depend on the machine's load.
func NewConnQuerier(conn *sql.Conn, statements *atomic.Uint64) *ConnQuerier {
	return &ConnQuerier{conn: conn, stmts: map[string]*sql.Stmt{}, statements: statements}
}

func (c *ConnQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	if c.statements != nil {
		c.statements.Add(1)
	}
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
// on a pooled connection the first time that connection runs it. A miss
// never prepares in the caller: the caller already holds a pooled
// connection (its read transaction), and preparing on the pool needs
// another, so a burst of cold readers as large as the pool would wait on
// each other forever. The caller runs the query directly on its own
// transaction instead, and the cache prepares the statement in the
// background for the next caller.
type StmtCache struct {
	db      *sql.DB
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.RWMutex
	stmts   map[string]*sql.Stmt
	pending map[string]bool
	closed  bool
}

// NewStmtCache caches statements for db.
func NewStmtCache(db *sql.DB) *StmtCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &StmtCache{db: db, ctx: ctx, cancel: cancel, stmts: map[string]*sql.Stmt{}, pending: map[string]bool{}}
}

// get returns the prepared statement, or nil after starting to prepare it.
func (c *StmtCache) get(query string) *sql.Stmt {
	c.mu.RLock()
	st := c.stmts[query]
	c.mu.RUnlock()
	if st != nil {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[query]; st != nil || c.pending[query] || c.closed {
		return st
	}
	c.pending[query] = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		st, err := c.db.PrepareContext(c.ctx, query)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.pending, query)
		if err != nil {
			return // the next miss tries again
		}
		if c.closed {
			st.Close()
			return
		}
		c.stmts[query] = st
	}()
	return nil
}

// Close stops background preparation and releases every statement.
func (c *StmtCache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
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
	if st := t.cache.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (t *TxQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.cache.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a one-row query in the transaction.
func (t *TxQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.cache.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// PoolQuerier runs cached statements straight on the pool, each on whatever
// connection is free, outside any transaction. Each statement sees its own
// snapshot, so it is for reads that are a single statement: they skip the
// BEGIN and ROLLBACK a read transaction costs. The caller holds no pooled
// connection, so a miss may run the query on the pool directly.
type PoolQuerier struct{ cache *StmtCache }

// Pool returns the cache's PoolQuerier.
func (c *StmtCache) Pool() PoolQuerier { return PoolQuerier{cache: c} }

// ExecContext runs a statement on the pool.
func (p PoolQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.cache.get(query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.cache.db.ExecContext(ctx, query, args...)
}

// QueryContext runs a query on the pool.
func (p PoolQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.cache.get(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.cache.db.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a one-row query on the pool.
func (p PoolQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.cache.get(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.cache.db.QueryRowContext(ctx, query, args...)
}
