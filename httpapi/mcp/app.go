package mcp

import (
	"encoding/json"
	"strings"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/room"
)

// The room's board as an MCP App (package mcpapp holds the view). A client
// that declares the io.modelcontextprotocol/ui extension on a request is
// shown, on that request only: the board resource in resources/list and
// resources/read, _meta.ui.resourceUri on the linked tools, and the
// app-only workspace_board. Any other request sees the catalog as it was
// before the board existed; the app-only tool's name is an unknown tool
// to it and the board's URI a resource not found.

// boardHandoffs and boardProposals bound what one board read carries: the
// newest handoffs the session may see and the newest pending proposals,
// each proposal with its diff (bounded by the engine, and all of them
// together by half the body bound: boardDiffBudget).
const (
	boardHandoffs  = 50
	boardProposals = 20
)

// appTools are the app-only tools: a host lets the view call them and
// never offers them to the model (visibility ["app"]).
func appTools() []Tool {
	return []Tool{{
		Name:  mcpapp.BoardTool,
		Title: "The room's board",
		Description: "What the board view shows, as structured content: who you are (participant_id, capabilities), " +
			"the handoffs you may see (newest first, as handoff_list gives them) and the pending proposals with their diffs. " +
			"Only the board view calls it. Needs read.",
		Input:    map[string]any{"type": "object", "properties": map[string]any{}},
		ReadOnly: true,
		uiMeta:   map[string]any{"ui": map[string]any{"resourceUri": mcpapp.BoardURI, "visibility": []string{"app"}}},
		app:      (*Handler).readBoard,
	}}
}

// board is workspace_board's answer.
type board struct {
	Me        boardMe         `json:"me"`
	Handoffs  []room.Handoff  `json:"handoffs"`
	Proposals []boardProposal `json:"proposals"`
}

// boardMe is the caller as the view needs it: which actions to offer
// (the server decides all the same).
type boardMe struct {
	ParticipantID string   `json:"participant_id"`
	Capabilities  []string `json:"capabilities"`
}

// boardProposal is a pending proposal with its diff against the document.
type boardProposal struct {
	room.ProposalInfo
	Diff room.ProposalDiff `json:"diff"`
}

// readBoard reads the handoffs, the pending proposals and their diffs in
// one read of the room, with the caller's principal: the same engine
// methods handoff_list, workspace_proposals and GET
// /workspace/proposal/diff call, so the same capabilities hold.
func (h *Handler) readBoard(c *call, args json.RawMessage) (any, error) {
	var in struct{}
	if err := wirejson.DecodeArgs(args, &in); err != nil {
		return nil, err
	}
	return actor.Read(c.ctx, h.room, func(q room.Querier) (board, error) {
		hs, err := h.eng.ListHandoffs(c.ctx, q, c.p, room.ListHandoffsInput{Limit: boardHandoffs})
		if err != nil {
			return board{}, err
		}
		ps, err := h.eng.Proposals(c.ctx, q, c.p, room.ProposalsInput{Status: "pending", Limit: boardProposals})
		if err != nil {
			return board{}, err
		}
		out := board{Me: boardMe{ParticipantID: c.p.ParticipantID, Capabilities: c.p.Caps.Strings()},
			Handoffs: hs.Handoffs, Proposals: make([]boardProposal, 0, len(ps.Proposals))}
		if out.Handoffs == nil {
			out.Handoffs = []room.Handoff{}
		}
		left := int(h.limits.MaxBodyBytes / 2)
		for _, p := range ps.Proposals {
			d, err := h.eng.ProposalDiff(c.ctx, q, c.p, room.ProposalDiffInput{ProposalID: p.ProposalID})
			if err != nil {
				return board{}, err
			}
			left = boardDiffBudget(&d, left)
			out.Proposals = append(out.Proposals, boardProposal{ProposalInfo: p, Diff: d})
		}
		return out, nil
	})
}

// boardResource is the board as resources/list lists it.
func boardResource() map[string]any {
	return map[string]any{
		"uri":         mcpapp.BoardURI,
		"name":        "commonroom-board",
		"title":       "The room's board",
		"description": "An MCP App: what waits for you in this room, pending proposals with their diffs, handoffs and their results, with Approve and Reject where you hold approve.",
		"mimeType":    mcpapp.MimeType,
		"_meta":       mcpapp.ResourceMeta(),
	}
}

// boardDiffBudget cuts d's diffs to the left bytes the board still has for
// diffs, at a line break, marking what it cut, and returns what is left.
// One proposal's diff may take half the body bound alone (the engine cuts
// it there); the board's twenty together may take no more, or a few large
// proposals would make each board read (the view reads it after every
// linked tool's answer) tens of megabytes.
func boardDiffBudget(d *room.ProposalDiff, left int) int {
	cut := func(s *string, truncated *bool) {
		if len(*s) <= left {
			left -= len(*s)
			return
		}
		keep := strings.LastIndexByte((*s)[:left], '\n') + 1
		*s, *truncated, left = (*s)[:keep], true, left-keep
	}
	cut(&d.Diff, &d.DiffTruncated)
	cut(&d.BaseDiff, &d.BaseDiffTruncated)
	return left
}
