package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/commonroom/ce/room"
)

// retainFlags are ce serve's retention policy, archive and per-participant
// storage share (issue 26). Like every flag they can come from the config
// file (`ce serve --config FILE`, lines of `flag value`, e.g.
// `retain-handoffs 180d`) or the environment (CE_RETAIN_HANDOFFS=180d).
type retainFlags struct {
	handoffs, participants, sessions, invitations, proposals, versions string
	archive                                                            string
	storagePerDay                                                      string
}

// addRetainFlags registers the flags on ce serve's flag set.
func addRetainFlags(fs *flag.FlagSet, f *retainFlags) {
	const w = " (e.g. 180d or 36h; at least 24h, at most 3650d; unset keeps them for ever)"
	fs.StringVar(&f.handoffs, "retain-handoffs", "", "delete finished handoffs (with their tasks, input requests and events) this long after they settled"+w)
	fs.StringVar(&f.participants, "retain-participants", "", "delete participants this long after they left, once nothing names them"+w)
	fs.StringVar(&f.sessions, "retain-sessions", "", "delete ended sessions and released leases this long after they ended"+w)
	fs.StringVar(&f.invitations, "retain-invitations", "", "delete revoked, expired or used-up invitations this long after"+w)
	fs.StringVar(&f.proposals, "retain-proposals", "", "delete decided proposals, text and all, this long after their decision"+w)
	fs.StringVar(&f.versions, "retain-versions", "", "keep every version this long, then one a day (the newest and any a proposal or live handoff is based on always)"+w)
	fs.StringVar(&f.archive, "archive", "", "append every pruned record to this file (or "+room.ArchiveFileName+" in this directory) as a JSON line before it is deleted")
	fs.StringVar(&f.storagePerDay, "storage-per-participant", humanBytes(room.Defaults().MaxStoredBytesPerDay),
		"bytes of text one participant's actions may make the room store per UTC day (e.g. 16MiB; 0 = no bound; the host is exempt)")
}

// retention parses the windows; each error names its flag.
func (f retainFlags) retention() (room.Retention, error) {
	var r room.Retention
	for _, w := range []struct {
		name string
		in   string
		out  *time.Duration
	}{
		{"handoffs", f.handoffs, &r.Handoffs},
		{"participants", f.participants, &r.Participants},
		{"sessions", f.sessions, &r.Sessions},
		{"invitations", f.invitations, &r.Invitations},
		{"proposals", f.proposals, &r.Proposals},
		{"versions", f.versions, &r.Versions},
	} {
		d, err := room.ParseRetentionWindow(w.in)
		if err != nil {
			return room.Retention{}, fmt.Errorf("--retain-%s: %v", w.name, err)
		}
		*w.out = d
	}
	if f.archive != "" && !r.Enabled() {
		return room.Retention{}, fmt.Errorf("--archive keeps what retention prunes, and no --retain-* window is set")
	}
	return r, nil
}

// storageShare parses --storage-per-participant.
func (f retainFlags) storageShare() (int64, error) {
	n, err := parseBytes(f.storagePerDay)
	if err != nil {
		return 0, fmt.Errorf("--storage-per-participant: %v", err)
	}
	return n, nil
}

// check refuses bad retention, archive and share flags before anything is
// opened.
func (f retainFlags) check() error {
	if _, err := f.retention(); err != nil {
		return err
	}
	_, err := f.storageShare()
	return err
}

// withRetention opens the archive (refusing a path it cannot write) and
// gives the engine the policy, before the actor starts. The archive is
// returned through *archive so serve can close it after the room.
func (f retainFlags) withRetention(archive **room.Archive) storeOption {
	return func(_ context.Context, _ *room.Store, eng *room.Engine) error {
		r, err := f.retention()
		if err != nil {
			return room.Errorf(room.KindInvalidRequest, "%v", err)
		}
		eng.Retention = r
		if f.archive != "" {
			a, err := room.OpenArchive(f.archive)
			if err != nil {
				return room.Errorf(room.KindInvalidRequest, "--archive: %v", err)
			}
			eng.Archive, *archive = a, a
		}
		return nil
	}
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}

// parseBytes reads a size: a whole number of bytes, optionally with a unit
// (KiB, MiB, GiB, KB, MB, GB).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (write e.g. 16MiB, 1GB or 65536)", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s is negative", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%s is too large", s)
	}
	return n * mult, nil
}

// humanBytes writes a size the way parseBytes reads it, in the largest
// binary unit that divides it.
func humanBytes(n int64) string {
	for i := 2; i >= 0; i-- {
		u := byteUnits[i]
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
