package cli

import (
	"errors"
	"log/slog"
)

// fdReserve is how many descriptors ce serve keeps for everything but
// connections: the document, the sidecar, its WAL and shared memory, the
// lock, the read pool's connections, logs.
const fdReserve = 256

// checkConnFlags refuses connection caps and timeouts that could not work,
// before anything is opened.
func checkConnFlags(f serveFlags) error {
	if f.maxConns < 1 || f.ownerMaxConns < 1 {
		return &exitError{code: exitUsage, err: errors.New("--max-conns and --owner-max-conns must be at least 1")}
	}
	if f.writeTimeout <= 0 || f.bodyTimeout <= 0 {
		return &exitError{code: exitUsage, err: errors.New("--write-timeout and --body-timeout must be positive")}
	}
	return nil
}

// fitConnCaps lowers the listeners' connection caps so that both listeners
// full still leave fdReserve descriptors under the open-file limit: a
// listener that runs out of descriptors cannot even refuse a connection, and
// the kernel's backlog fills instead. The owner listener keeps its cap unless
// the limit is very small. limit 0 means unknown: the caps are kept.
func fitConnCaps(limit uint64, ingress, owner int) (int, int) {
	if limit == 0 || uint64(ingress)+uint64(owner)+fdReserve <= limit {
		return ingress, owner
	}
	avail := 2
	if limit > fdReserve+2 {
		avail = int(min(limit-fdReserve, 1<<30))
	}
	owner = max(1, min(owner, avail/8))
	return max(1, min(ingress, avail-owner)), owner
}

// connCaps is fitConnCaps for ce serve, saying so when it lowers a cap.
func connCaps(log *slog.Logger, limit uint64, f serveFlags) (ingress, owner int) {
	ingress, owner = fitConnCaps(limit, f.maxConns, f.ownerMaxConns)
	if ingress != f.maxConns || owner != f.ownerMaxConns {
		log.Warn("the open-file limit is too low for the connection caps; lowered",
			"open_file_limit", limit, "max_conns", ingress, "owner_max_conns", owner)
	}
	return ingress, owner
}
