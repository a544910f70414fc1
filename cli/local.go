package cli

import (
	"context"
	"log/slog"
	"os"
	"os/user"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// localRoom is a room opened in this process: the engine, its sidecar and
// the running actor. The caller holds the writer lock.
type localRoom struct {
	eng   *room.Engine
	store *room.Store
	room  *actor.Room
}

func hostName(env Env) string {
	if n := env.Getenv("USER"); n != "" {
		return n
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "host"
}

// openLocal opens the room of docPath. dbPath overrides the sidecar
// location (--ephemeral); pub receives commits (nil for one-shot commands).
func openLocal(ctx context.Context, docPath, dbPath, host string, pub actor.Publisher, log *slog.Logger) (*localRoom, error) {
	return openLocalWith(ctx, docPath, dbPath, host, pub, log, room.Defaults(), 0, actor.WatchConfig{})
}

// storeOption adjusts the opened sidecar and the engine before the writer
// connection is handed to the actor (ce serve's --wal-autocheckpoint, its
// retention policy and archive).
type storeOption func(context.Context, *room.Store, *room.Engine) error

// withWALAutocheckpoint sets the writer's automatic checkpoint threshold.
func withWALAutocheckpoint(pages int) storeOption {
	return func(ctx context.Context, st *room.Store, _ *room.Engine) error {
		return st.SetWALAutocheckpoint(ctx, pages)
	}
}

// openLocalWith is openLocal with the room's limits and the writer's batch
// bound, the file watcher and store options chosen by the caller (ce serve).
// One-shot commands do without the watcher: their one command reads the file anyway.
func openLocalWith(ctx context.Context, docPath, dbPath, host string, pub actor.Publisher, log *slog.Logger, limits room.Limits, maxBatch int, watch actor.WatchConfig, opts ...storeOption) (*localRoom, error) {
	eng, err := room.NewEngine(docPath, limits)
	if err != nil {
		return nil, err
	}
	if dbPath == "" {
		dbPath = room.SidecarPath(eng.DocPath)
	}
	// The sidecar holds the whole text: no wider permissions than the document.
	narrowed, err := room.PrepareSidecar(ctx, eng.DocPath, dbPath)
	if err != nil {
		return nil, err
	}
	for _, p := range narrowed {
		if log != nil {
			log.Warn("narrowed a file's permissions to the document's", "file", p)
		}
	}
	// An older sidecar is upgraded in place before the room serves; at a
	// million handoffs that takes seconds (migration 10 rebuilds two
	// tables), so say so rather than look hung.
	from, _ := room.SidecarSchema(ctx, dbPath)
	upgrading := log != nil && from > 0 && from < room.SchemaVersion()
	if upgrading {
		log.Info("upgrading the sidecar to this ce's schema; with many handoffs this takes a while", "file", dbPath, "from", from, "to", room.SchemaVersion())
	}
	// An older sidecar is also converted to incremental auto-vacuum, by
	// one VACUUM after the migrations (room/vacuum.go): say so before, with
	// its size, and after, with the time it took and the new size.
	before, _ := room.SidecarSpace(ctx, dbPath)
	converting := log != nil && before.AutoVacuum != "" && before.AutoVacuum != "incremental"
	if converting {
		log.Info("converting the sidecar to incremental auto-vacuum (one VACUUM); with many handoffs this takes a while",
			"file", dbPath, "bytes", before.Bytes, "free_pages", before.FreePages, "auto_vacuum", before.AutoVacuum)
	}
	started := time.Now()
	st, err := room.OpenStore(ctx, dbPath, false)
	if err != nil {
		return nil, err
	}
	if upgrading {
		log.Info("upgraded the sidecar", "file", dbPath, "schema", room.SchemaVersion(), "took", time.Since(started).Round(time.Millisecond))
	}
	if conv, ok := st.Conversion(); ok && log != nil {
		logConversion(ctx, log, st, dbPath, before, conv)
	}
	for _, o := range opts {
		if err := o(ctx, st, eng); err != nil {
			st.Close()
			return nil, err
		}
	}
	cfg := actor.Config{Engine: eng, Store: st, Logger: log, HostName: host, MaxBatch: maxBatch, Watch: watch}
	if pub != nil {
		cfg.Publisher = pub
	}
	r, err := actor.Open(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &localRoom{eng: eng, store: st, room: r}, nil
}

// Close stops the room, closes its sidecar and then the engine (the
// document's directory it holds). The engine stays open if the room did
// not stop in time: its writer may still use the directory's descriptor,
// and the process is about to end anyway.
func (l *localRoom) Close(ctx context.Context) error {
	err := l.room.Close(ctx)
	if cerr := l.store.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.eng.Close()
	}
	return err
}

// withLocalWrite runs fn against the room of docPath in this process when no
// room is serving it; when one is, it returns the owner client instead and
// fn is not called. Never two writers (D21).
func withLocalWrite(ctx context.Context, env Env, docPath string, fn func(l *localRoom) error) (*ownerClient, error) {
	abs, err := room.ExistingDocPath(docPath)
	if err != nil {
		return nil, err
	}
	oc, lock, err := servingRoom(abs)
	if err != nil || oc != nil {
		return oc, err
	}
	defer lock.Release()
	l, err := openLocal(ctx, abs, "", hostName(env), nil, nil)
	if err != nil {
		return nil, err
	}
	ferr := fn(l)
	if cerr := l.Close(ctx); ferr == nil {
		ferr = cerr
	}
	return nil, ferr
}

// readOnly opens the sidecar of docPath query-only, as the local operator.
// It works whether or not a room is serving (WAL readers never block it).
func readOnly(ctx context.Context, docPath string) (*room.Engine, *room.Store, error) {
	if _, err := os.Stat(docPath); err != nil {
		return nil, nil, room.Errorf(room.KindNotFound, "%s: no such file", docPath)
	}
	eng, err := room.NewEngine(docPath, room.Defaults())
	if err != nil {
		return nil, nil, err
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), true)
	if err != nil {
		return nil, nil, err
	}
	if err := eng.Load(ctx, st.Reader); err != nil {
		st.Close()
		return nil, nil, err
	}
	return eng, st, nil
}

// logConversion says how the conversion to incremental auto-vacuum went.
// A failed one (a full disk) changed nothing: the room serves the sidecar
// as it was, and the next start tries again.
func logConversion(ctx context.Context, log *slog.Logger, st *room.Store, dbPath string, before room.Space, conv room.VacuumConversion) {
	took := conv.Took.Round(time.Millisecond)
	if conv.Err != nil {
		log.Warn("could not convert the sidecar to incremental auto-vacuum; it is unchanged and served as it was, and the next start tries again",
			"file", dbPath, "took", took, "err", conv.Err)
		return
	}
	after, err := st.Space(ctx)
	if err != nil {
		log.Info("converted the sidecar to incremental auto-vacuum", "file", dbPath, "took", took)
		return
	}
	log.Info("converted the sidecar to incremental auto-vacuum", "file", dbPath, "took", took,
		"bytes_before", before.Bytes, "bytes_after", after.Bytes, "free_pages", after.FreePages)
}
