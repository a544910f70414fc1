package room

import (
	"context"
	"fmt"
)

// DiffResult is the unified diff from one version to the current one.
type DiffResult struct {
	WorkspaceID    string `json:"workspace_id"`
	BaseVersion    int64  `json:"base_version"`
	CurrentVersion int64  `json:"current_version"`
	Diff           string `json:"diff"`
	// DiffTruncated is set when the diff was cut at the response bound
	// (the request body limit, on a line boundary).
	DiffTruncated bool `json:"diff_truncated,omitempty"`
}

// DiffInput names the version a diff starts from.
type DiffInput struct {
	BaseVersion int64 `json:"base_version" jsonschema:"the version you read before" schema:"required,minimum=1" query:",required"`
}

// Diff returns the unified diff from v<base> to v<current>.
func (e *Engine) Diff(ctx context.Context, q Querier, p Principal, in DiffInput) (DiffResult, error) {
	base := in.BaseVersion
	if err := p.Require(CapRead); err != nil {
		return DiffResult{}, err
	}
	if base < 1 {
		return DiffResult{}, Errorf(KindVersionNotFound, "version %d does not exist", base).With("base_version", base)
	}
	cur, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return DiffResult{}, err
	}
	out := DiffResult{WorkspaceID: e.WorkspaceID, BaseVersion: base, CurrentVersion: cur.Version}
	if base == cur.Version {
		return out, nil
	}
	b, err := e.versionRow(ctx, q, base)
	if err != nil {
		return DiffResult{}, err
	}
	out.Diff, out.DiffTruncated = e.unifiedDiff(b.content, cur.Content, fmt.Sprintf("v%d", base), fmt.Sprintf("v%d", cur.Version))
	return out, nil
}

// Changes lists the versions after FromVersion, oldest first.
type Changes struct {
	WorkspaceID string          `json:"workspace_id"`
	FromVersion int64           `json:"from_version"`
	ToVersion   int64           `json:"to_version"` // the current version
	Changes     []VersionChange `json:"changes"`
}

// ChangesInput selects the versions ChangesSince lists.
type ChangesInput struct {
	Version int64 `json:"version" jsonschema:"list the versions after this one" schema:"required,minimum=0" query:",required"`
	Limit   int   `json:"limit,omitempty" jsonschema:"at most this many (default 20, at most 200)" schema:"minimum=0"`
	// MaxItems is the plain HTTP route's other name for a smaller limit
	// (the bounds /protocol advertises); the tool has only limit.
	MaxItems int `json:"-" query:"max_items"`
}

// ChangesSince lists up to limit versions after version (default 20, bounded
// by the list limit). Version 0 lists from the first version; a version past
// the current one is version_not_found.
func (e *Engine) ChangesSince(ctx context.Context, q Querier, p Principal, in ChangesInput) (Changes, error) {
	version, limit := in.Version, in.Limit
	if in.MaxItems > 0 && (limit == 0 || in.MaxItems < limit) {
		limit = in.MaxItems
	}
	if err := p.Require(CapRead); err != nil {
		return Changes{}, err
	}
	if version < 0 {
		return Changes{}, invalid("version", "version must not be negative")
	}
	cur, err := currentVersion(ctx, q)
	if err != nil {
		return Changes{}, err
	}
	if version > cur {
		return Changes{}, Errorf(KindVersionNotFound, "version %d does not exist; the document is at version %d", version, cur).
			With("base_version", version).With("current_version", cur)
	}
	list, err := versionChanges(ctx, q, version, e.boundLimit(limit, 20))
	if err != nil {
		return Changes{}, err
	}
	return Changes{WorkspaceID: e.WorkspaceID, FromVersion: version, ToVersion: cur, Changes: list}, nil
}

// Listener describes how joiners reach the room, without the endpoint:
// addresses and ports never leave the host (spec §0).
type Listener struct {
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	Encrypted bool   `json:"encrypted"`
	// Describe is the exposed hint's one line, as the banner, ce status
	// and the owner page show it: "NAME (private, encrypted) host:port"
	// for an admin (the host, the operator, the owner page), without the
	// endpoint for everyone else, who never learn an address here.
	Describe string `json:"describe"`
}

// DiagnosticParticipant is a participant as diagnostics show it.
type DiagnosticParticipant struct {
	ParticipantID string  `json:"participant_id"`
	Name          string  `json:"name"`
	Kind          string  `json:"kind"`
	Transport     *string `json:"transport"`
}

// Diagnostics is the redacted connection picture.
type Diagnostics struct {
	Listener     Listener                `json:"listener"`
	Participants []DiagnosticParticipant `json:"participants"`
}

// Diagnostics reports the listener (type, mode, encryption; the endpoint
// only to an admin) and who is in the room with which transport.
func (e *Engine) Diagnostics(ctx context.Context, q Querier, p Principal, _ Empty) (Diagnostics, error) {
	if err := p.Require(CapRead); err != nil {
		return Diagnostics{}, err
	}
	h := e.currentHints()[0]
	out := Diagnostics{Listener: Listener{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted}, Participants: []DiagnosticParticipant{}}
	if p.IsAdmin() {
		out.Listener.Describe = h.Describe()
	} else {
		out.Listener.Describe = Hint{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted}.Describe()
	}
	ps, err := e.participants(ctx, q, p)
	if err != nil {
		return Diagnostics{}, err
	}
	for _, pt := range ps {
		out.Participants = append(out.Participants, DiagnosticParticipant{
			ParticipantID: pt.ParticipantID, Name: pt.Name, Kind: pt.Kind, Transport: pt.Transport,
		})
	}
	return out, nil
}
