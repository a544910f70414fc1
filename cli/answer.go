package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// maxResponsesBytes bounds --responses read from stdin: the room's request
// body bound is far above any form's answers.
const maxResponsesBytes = 1 << 20

// answerCommand is `ce answer HANDOFF_ID`: the host answers the open
// questions a worker asked on a handoff, as handoff_answer, tasks/update
// and the owner page's answer boxes do. The answers come as the responses
// object (--responses, the handoff_answer input_responses form) or as flags
// (--answer KEY=VALUE, --decline KEY). A handoff with no open question, a
// key that is not an open question, and a malformed object are refused
// before anything is sent.
func answerCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce answer", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	var answers, declines multiFlag
	fs.Var(&answers, "answer", "KEY=VALUE: answer the open question KEY (repeat for several)")
	fs.Var(&declines, "decline", "KEY: decline to answer the open question KEY (repeat for several)")
	responses := fs.String("responses", "", `the answers as one JSON object, {"KEY": {"action": "accept", "content": {"answer": "…"}}} ("-" reads it from stdin)`)
	asJSON := fs.Bool("json", false, "print JSON (the route's answer, ids kept)")
	return &ffcli.Command{
		Name:       "answer",
		ShortUsage: "ce answer HANDOFF_ID --workspace FILE (--answer KEY=VALUE ... | --decline KEY ... | --responses JSON|-) [--json]",
		ShortHelp:  "answer the open questions of a handoff's worker, as the host",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErr("answer takes exactly one HANDOFF_ID")
			}
			id := args[0]
			if _, err := kindOf("answer", id, itemHandoff); err != nil {
				return err
			}
			given, err := parseResponses(env.Stdin, *responses)
			if err != nil {
				return err
			}
			var res room.AnswerHandoffResult
			err = withHostDoor(ctx, env, *workspace, func(d *hostDoor) error {
				var h room.Handoff
				if err := d.call(ctx, "handoff.get", room.HandoffIDInput{HandoffID: id}, &h); err != nil {
					return err
				}
				open := openInputs(h)
				if len(open) == 0 {
					return noOpenQuestion(h)
				}
				in, err := buildResponses(open, given, answers, declines)
				if err != nil {
					return err
				}
				if err := d.call(ctx, "handoff.answer", room.AnswerHandoffInput{HandoffID: id, InputResponses: in}, &res); err != nil {
					return err
				}
				if len(res.AnsweredKeys) == 0 {
					// Someone else answered (or the task ended) between the
					// read and the answer: nothing of ours landed.
					return room.Errorf(room.KindHandoffConflict, "none of the answers landed: %s is no longer open on handoff %s (answered meanwhile, or the task ended)",
						strings.Join(res.IgnoredKeys, ", "), id).With("handoff_id", id).With("ignored_keys", res.IgnoredKeys)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			printAnswered(env.Stdout, res, readNames(ctx, *workspace, handoffParties(res.Handoff)...))
			return nil
		},
	}
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// parseResponses reads --responses: a JSON object of answers (from stdin
// for "-"); "" is none. Anything else is a usage error naming what is
// wrong, before the room is opened.
func parseResponses(stdin io.Reader, raw string) (map[string]json.RawMessage, error) {
	if raw == "" {
		return nil, nil
	}
	b := []byte(raw)
	if raw == "-" {
		var err error
		b, err = io.ReadAll(io.LimitReader(stdin, maxResponsesBytes+1))
		if err != nil {
			return nil, usageErr("reading --responses from stdin: " + err.Error())
		}
		if len(b) > maxResponsesBytes {
			return nil, room.Errorf(room.KindLimitExceeded, "--responses from stdin is larger than %d bytes", maxResponsesBytes)
		}
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, usageErr(`--responses must be one JSON object of answers, {"KEY": {"action": "accept", "content": {"answer": "…"}}}` + jsonProblem(err))
	}
	for k, v := range m {
		if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
			return nil, usageErr(fmt.Sprintf(`--responses: the answer to %q must be an object, {"action": "accept", "content": {...}}`, k))
		}
	}
	return m, nil
}

func jsonProblem(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// openInputs are the handoff's questions still waiting for an answer.
func openInputs(h room.Handoff) []room.HandoffInput {
	var out []room.HandoffInput
	for _, in := range h.Inputs {
		if in.Status == "open" {
			out = append(out, in)
		}
	}
	return out
}

// noOpenQuestion is the refusal of ce answer on a handoff nobody is waiting
// on: handoff_conflict, as answering a decided handoff would be.
func noOpenQuestion(h room.Handoff) error {
	task := "purged"
	if h.TaskStatus != nil {
		task = *h.TaskStatus
	}
	return room.Errorf(room.KindHandoffConflict, "handoff %s has no open question to answer (it is %s, its task %s); nothing was sent",
		h.HandoffID, h.Status, task).With("handoff_id", h.HandoffID).With("status", h.Status)
}

// buildResponses merges --responses with --answer and --decline into the
// input_responses of handoff_answer, refusing a key that is not one of the
// open questions (the engine would ignore it; a typo should not look like
// an answer) and a question answered twice.
func buildResponses(open []room.HandoffInput, given map[string]json.RawMessage, answers, declines []string) (map[string]room.ElicitResult, error) {
	byKey := map[string]room.HandoffInput{}
	keys := make([]string, len(open))
	for i, in := range open {
		byKey[in.Key] = in
		keys[i] = in.Key
	}
	openList := strings.Join(keys, ", ")
	out := map[string]room.ElicitResult{}
	add := func(key string, v []byte) error {
		if _, ok := byKey[key]; !ok {
			return usageErr(fmt.Sprintf("%q is not an open question of this handoff (open: %s)", key, openList))
		}
		if _, dup := out[key]; dup {
			return usageErr(fmt.Sprintf("question %q is answered twice", key))
		}
		out[key] = room.ElicitResult(v)
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(given)) {
		if err := add(k, given[k]); err != nil {
			return nil, err
		}
	}
	for _, a := range answers {
		key, value, ok := strings.Cut(a, "=")
		if !ok || key == "" {
			return nil, usageErr(fmt.Sprintf("--answer %q: give KEY=VALUE (open: %s)", a, openList))
		}
		in, known := byKey[key]
		if !known {
			return nil, usageErr(fmt.Sprintf("%q is not an open question of this handoff (open: %s)", key, openList))
		}
		content, err := formContent(in, value)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
		if err := add(key, b); err != nil {
			return nil, err
		}
	}
	for _, key := range declines {
		if err := add(key, []byte(`{"action":"decline"}`)); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		var b strings.Builder
		for _, in := range open {
			fmt.Fprintf(&b, "\n  %s: %s", in.Key, oneLine(termSafe(in.Message), 120))
		}
		return nil, usageErr("give the answers with --answer KEY=VALUE (or --decline KEY, or --responses JSON); the open questions are:" + b.String())
	}
	return out, nil
}

// formContent is the content of an --answer: the question's form has one
// field (by default "answer"), which VALUE fills, read as the number or
// boolean the form asks for. A form of several fields needs --responses.
func formContent(in room.HandoffInput, value string) (map[string]any, error) {
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(in.RequestedSchema, &schema)
	if len(schema.Properties) == 0 {
		return map[string]any{"answer": value}, nil
	}
	if len(schema.Properties) > 1 {
		fields := make([]string, 0, len(schema.Properties))
		for f := range schema.Properties {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		return nil, usageErr(fmt.Sprintf("question %q asks for several fields (%s): answer it with --responses", in.Key, strings.Join(fields, ", ")))
	}
	for field, p := range schema.Properties {
		switch p.Type {
		case "number", "integer":
			n, err := strconv.ParseFloat(value, 64)
			if err != nil || (p.Type == "integer" && n != float64(int64(n))) {
				return nil, usageErr(fmt.Sprintf("question %q asks for %s %s: %q is not one", in.Key, article(p.Type), p.Type, value))
			}
			return map[string]any{field: n}, nil
		case "boolean":
			v, err := strconv.ParseBool(value)
			if err != nil {
				return nil, usageErr(fmt.Sprintf("question %q asks for true or false: %q is neither", in.Key, value))
			}
			return map[string]any{field: v}, nil
		default:
			return map[string]any{field: value}, nil
		}
	}
	return nil, nil // unreachable: one property
}

func article(word string) string {
	if strings.HasPrefix(word, "i") {
		return "an"
	}
	return "a"
}

// printAnswered says which questions were answered and what the worker's
// task does now: working again, or still waiting on the rest.
func printAnswered(w io.Writer, res room.AnswerHandoffResult, names partyNames) {
	h := res.Handoff
	fmt.Fprintf(w, "answered %s on handoff %s: %s %q\n", strings.Join(res.AnsweredKeys, ", "), h.HandoffID, names.arrow(h), oneLine(termSafe(h.Summary), 120))
	if len(res.IgnoredKeys) > 0 {
		fmt.Fprintf(w, "  not open any more, ignored: %s\n", strings.Join(res.IgnoredKeys, ", "))
	}
	if rest := openInputs(h); len(rest) > 0 {
		keys := make([]string, len(rest))
		for i, in := range rest {
			keys[i] = in.Key
		}
		fmt.Fprintf(w, "  still waiting for: %s\n", strings.Join(keys, ", "))
		return
	}
	task := "purged"
	if h.TaskStatus != nil {
		task = *h.TaskStatus
	}
	fmt.Fprintf(w, "  %s's task is %s again\n", names.ofPtr(h.AssigneeID, "the worker"), task)
}
