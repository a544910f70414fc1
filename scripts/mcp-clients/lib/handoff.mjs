// The handoff lifecycle that every tools-only host drives through ce mcp,
// shared by the JavaScript client tests (scripts/mcp-clients.sh). It knows
// no SDK: each test passes `call(host, tool, args)`, which makes the tools/call
// through its own client and returns the result's structuredContent (failing
// on an isError result). Every state is read back with handoff_get by
// another party than the one that changed it.
import assert from "node:assert/strict";
import { readFileSync, renameSync, writeFileSync } from "node:fs";

export const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set (run scripts/mcp-clients.sh)`);
  return v;
};

// The tools a tools-only host needs for the whole workflow.
export const lifecycleTools = [
  "handoff_create",
  "handoff_accept",
  "handoff_request_input",
  "handoff_answer",
  "handoff_complete",
  "handoff_approve",
  "handoff_cancel",
  "handoff_get",
];

// participantOf reads the participant id a `ce mcp` state file holds.
export function participantOf(stateFile) {
  const id = JSON.parse(readFileSync(stateFile, "utf8")).participant_id;
  assert.match(id ?? "", /^participant_/, `${stateFile} holds a participant`);
  return id;
}

export async function getHandoff(call, h, id) {
  const got = await call(h, "handoff_get", { handoff_id: id });
  assert.equal(got.handoff_id, id, `handoff_get ${id}: ${JSON.stringify(got)}`);
  return got;
}

// toolsOnlyLifecycle: create as the creator (addressed to the worker),
// accept as the worker, the worker asks for input, the creator answers with
// handoff_answer, the worker completes, the approver approves. It returns
// the handoff id and the wall time from create to the approval read back.
export async function toolsOnlyLifecycle({ label, call, creator, worker, approver, ids, step = () => {} }) {
  const start = performance.now();
  step("handoff_create");
  const created = await call(creator, "handoff_create", {
    summary: `write the plan (${label})`,
    assignee: ids.worker,
    idempotency_key: `${label}-${Date.now()}`,
  });
  const id = created.handoff?.handoff_id;
  assert.match(id ?? "", /^handoff_/, `handoff_create without the tasks extension answers the handoff: ${JSON.stringify(created)}`);
  assert.match(created.task_id ?? "", /^task_/, `and its task_id: ${JSON.stringify(created)}`);
  assert.equal(created.handoff.task_id, created.task_id);
  assert.equal(created.handoff.status, "open");
  assert.equal(created.handoff.owner_id, ids.creator);

  step("handoff_accept");
  const accepted = await call(worker, "handoff_accept", { handoff_id: id });
  assert.equal(accepted.status, "accepted", JSON.stringify(accepted));
  assert.equal(accepted.assignee_id, ids.worker);

  step("handoff_request_input");
  await call(worker, "handoff_request_input", { handoff_id: id, requests: [{ key: "venue", message: "Which venue?" }] });
  let h = await getHandoff(call, creator, id);
  assert.equal(h.task_status, "input_required", `the owner sees the question: ${JSON.stringify(h)}`);
  assert.deepEqual(h.inputs.map((i) => [i.key, i.status]), [["venue", "open"]]);

  step("handoff_answer");
  const answer = `the town hall (${label})`;
  await call(creator, "handoff_answer", { handoff_id: id, input_responses: { venue: { action: "accept", content: { answer } } } });
  h = await getHandoff(call, worker, id);
  assert.equal(h.task_status, "working", `answered, the task works again: ${JSON.stringify(h)}`);
  assert.equal(h.inputs[0].status, "answered");
  assert.deepEqual(h.inputs[0].response, { action: "accept", content: { answer } }, "the worker reads the answer");

  step("handoff_complete");
  const done = await call(worker, "handoff_complete", { handoff_id: id, result: { text: `the plan: ${answer}`, artifacts: [], is_error: false } });
  assert.equal(done.status, "result_ready", JSON.stringify(done));

  step("handoff_approve");
  await call(approver, "handoff_approve", { handoff_id: id });
  h = await getHandoff(call, creator, id);
  const elapsedMs = performance.now() - start;
  assert.equal(h.status, "approved", JSON.stringify(h));
  assert.equal(h.decided_by, ids.approver);
  assert.equal(h.task_status, "completed");
  assert.equal(h.result?.text, `the plan: ${answer}`);
  return { id, elapsedMs };
}

// cancelledByTool: a second handoff, cancelled by its owner with the
// handoff_cancel tool; the worker reads it back cancelled.
export async function cancelledByTool({ label, call, creator, worker, ids }) {
  const created = await call(creator, "handoff_create", { summary: `never mind (${label})`, assignee: ids.worker });
  const id = created.handoff.handoff_id;
  await call(creator, "handoff_cancel", { handoff_id: id });
  const h = await getHandoff(call, worker, id);
  assert.equal(h.status, "cancelled", JSON.stringify(h));
  assert.equal(h.task_status, "cancelled");
  assert.equal(h.cancelled_by, ids.creator);
  return id;
}

// editOutside saves the room's Markdown file the way an editor does (a new
// file renamed over it), with one more line.
export function editOutside(marker) {
  const doc = env("CE_DOC");
  writeFileSync(`${doc}.edit`, readFileSync(doc, "utf8") + `\n${marker}\n`);
  renameSync(`${doc}.edit`, doc);
}

// within rejects when p has not settled in ms.
export function within(ms, what, p) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// wire records the last messages each way of one host, for failure reports.
export function wireLog(limit = 40) {
  const lines = [];
  return {
    lines,
    record(dir, m) {
      const s = typeof m === "string" ? m : JSON.stringify(m);
      lines.push(dir + (s.length > 2000 ? s.slice(0, 2000) + "…" : s));
      if (lines.length > limit) lines.shift();
    },
  };
}
