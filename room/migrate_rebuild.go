package room

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// unpairedIDsSchema is migration 10, which rebuilds handoffs and tasks
// without the UNIQUE constraints on handoffs.task_id and
// tasks.correlation_id (see its SQL for why).
const unpairedIDsSchema = 10

// rebuildsTables says whether migration v rebuilds tables that other tables
// reference. SQLite's procedure for that (lang_altertable.html#otheralter)
// runs with foreign keys off: with them on, DROP TABLE first deletes every
// row, checking each against every table that references it, and
// handoffs.follows_handoff_id has no index, so each deleted handoff would
// walk the whole table. PRAGMA foreign_keys cannot change inside a
// transaction, so the runner sets it around the migration's transaction
// (withoutForeignKeys) and the migration checks the keys itself before it
// commits (CheckForeignKeys).
func rebuildsTables(v int) bool { return v == unpairedIDsSchema }

func init() { migrationSteps[unpairedIDsSchema] = CheckForeignKeys }

// withoutForeignKeys runs fn on conn with foreign key enforcement off and
// turns it back on afterwards, whatever fn returned. conn is the writer's
// one connection, so enforcement must be on again before anything else
// uses it: if it cannot be turned back on, the error is returned and the
// store is not opened.
func withoutForeignKeys(ctx context.Context, conn *sql.Conn, fn func() error) (err error) {
	if err := setForeignKeys(ctx, conn, false); err != nil {
		return err
	}
	defer func() {
		if onErr := setForeignKeys(context.WithoutCancel(ctx), conn, true); onErr != nil && err == nil {
			err = onErr
		}
	}()
	return fn()
}

// setForeignKeys sets PRAGMA foreign_keys and reads it back: SQLite ignores
// the pragma inside a transaction without saying so.
func setForeignKeys(ctx context.Context, conn *sql.Conn, on bool) error {
	want := 0
	if on {
		want = 1
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA foreign_keys = %d", want)); err != nil {
		return err
	}
	var got int
	if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&got); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("PRAGMA foreign_keys is %d, want %d", got, want)
	}
	return nil
}

// CheckForeignKeys fails, naming up to five rows, when any row of the
// sidecar on conn names a row that does not exist. It is step 10 of
// SQLite's rebuild procedure: with enforcement off for migration 10, the
// whole sidecar's foreign keys are checked before it commits, and a row
// that breaks one fails it (the transaction rolls back, the sidecar stays at
// the previous schema). The bench checks the sidecars it fills directly with
// it too.
func CheckForeignKeys(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	var bad []string
	n := 0
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		if n++; len(bad) < 5 {
			bad = append(bad, fmt.Sprintf("%s row %d names a %s row that does not exist", table, rowid.Int64, parent))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("the sidecar's foreign keys do not hold (%d rows), e.g. %s", n, strings.Join(bad, "; "))
	}
	return nil
}
