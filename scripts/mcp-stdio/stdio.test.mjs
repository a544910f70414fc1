// ce mcp driven by the official MCP client library over stdio: two hosts,
// each launching its own `ce mcp` as an MCP server process. The creator
// hands work to the worker through @modelcontextprotocol/ext-tasks (a task
// handle, polled with tasks/get until it settles); the worker follows the
// task on a subscriptions/listen stream, accepts and completes it, and
// closes the listen (notifications/cancelled). A second handoff's task is
// then cancelled by its creator (tasks/cancel through ce mcp).
//
// Run by scripts/mcp-stdio.sh, which starts the room and sets
// CE_BIN, CE_INVITE_CREATOR, CE_INVITE_WORKER and CE_STATE_DIR.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const VERSION = "2026-07-28";
// anyResult is a Standard Schema that accepts any result.
const anyResult = { "~standard": { version: 1, vendor: "ce-tests", validate: (value) => ({ value }) } };
const TASKS = "io.modelcontextprotocol/tasks";
const caps = { extensions: { [TASKS]: {} } };
const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set (run scripts/mcp-stdio.sh)`);
  return v;
};
const ce = env("CE_BIN");
const step = (what) => process.env.CE_MCP_STDIO_VERBOSE && console.error(`# ${what}`);
const stateDir = env("CE_STATE_DIR");

// host starts one `ce mcp` through the SDK's stdio transport, pinned to 2026-07-28.
async function host(name, invite) {
  const state = join(stateDir, `${name}.json`);
  const client = new Client({ name, version: "1.0.0" }, { capabilities: caps, versionNegotiation: { mode: { pin: VERSION } } });
  const logs = process.env.CE_MCP_STDIO_VERBOSE ? ["--log-level", "debug"] : [];
  const transport = new StdioClientTransport({ command: ce, args: ["mcp", invite, "--name", name, "--state", state, ...logs], stderr: "inherit" });
  await client.connect(transport);
  return { client, state, info: { name, version: "1.0.0" } };
}

// lineDispatcher is the host-owned request path ext-tasks needs for the
// 2026-07-28 task wire shapes: a second `ce mcp` on the same state file (so
// the same session and participant), spoken to line by line.
function lineDispatcher(invite, state) {
  const child = spawn(ce, ["mcp", invite, "--state", state], { stdio: ["pipe", "pipe", "inherit"] });
  const pending = new Map();
  let next = 1;
  const seen = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const msg = JSON.parse(line);
    const p = pending.get(JSON.stringify(msg.id));
    if (p) {
      pending.delete(JSON.stringify(msg.id));
      p(msg);
    }
  });
  const dispatch = (request) =>
    new Promise((resolve) => {
      const id = next++;
      pending.set(JSON.stringify(id), (msg) => {
        seen.push({ request, msg });
        resolve(msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result });
      });
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, ...request }) + "\n");
    });
  const close = () =>
    new Promise((resolve) => {
      child.on("exit", (code) => resolve(code));
      child.stdin.end();
    });
  return { dispatch, seen, close };
}

test("a handoff through ce mcp with the official client: create as one agent, accept and complete as another, tasks/get, a listen, cancel", async (t) => {
  step("connecting the creator");
  const creator = await host("creator", env("CE_INVITE_CREATOR"));
  step("connecting the worker");
  const worker = await host("worker", env("CE_INVITE_WORKER"));
  t.after(async () => {
    await creator.client.close();
    await worker.client.close();
  });

  step("tools/list");
  const tools = await worker.client.listTools();
  assert.ok(tools.tools.some((x) => x.name === "handoff_accept"), "tools/list through ce mcp names the room's tools");

  const workerID = JSON.parse(readFileSync(worker.state, "utf8")).participant_id;
  assert.match(workerID, /^participant_/);

  const raw = lineDispatcher(env("CE_INVITE_CREATOR"), creator.state);
  const session = createTaskSessionFromClient(creator.client, {
    endpointId: "ce-mcp-stdio-creator",
    rawDispatch: raw.dispatch,
    v2RequestFraming: { protocolVersion: VERSION, clientInfo: creator.info, clientCapabilities: caps },
  });
  t.after(async () => {
    await session.close();
    assert.equal(await raw.close(), 0, "the dispatcher's ce mcp exits 0 at the end of its stdin");
  });

  step("handoff_create through ext-tasks");
  const exec = await session.callTool("handoff_create", { summary: "write the plan", assignee: workerID });
  assert.equal(exec.kind, "task", "handoff_create with the Tasks extension is task-backed");
  const taskID = exec.handle.taskId;
  const created = raw.seen.find((s) => s.request.method === "tools/call");
  const handoffID = created.msg.result._meta["commonroom/handoff_id"];
  assert.match(handoffID, /^handoff_/);

  // The worker follows the task on a listen stream through its own ce mcp.
  const frames = [];
  let sawCompleted;
  const completed = new Promise((resolve) => (sawCompleted = resolve));
  worker.client.fallbackNotificationHandler = async (n) => {
    frames.push(n);
    if (n.method === "notifications/tasks" && n.params?.taskId === taskID && n.params?.status === "completed") sawCompleted(n);
  };
  const call = async (name, args) => {
    const res = await worker.client.callTool({ name, arguments: args });
    assert.equal(res.isError, false, `${name}: ${JSON.stringify(res)}`);
    return res.structuredContent;
  };
  assert.equal((await call("handoff_accept", { handoff_id: handoffID })).status, "accepted");
  // The task is the worker's once it accepted: now it may follow it.
  step("listen");
  // Client.listen() carries the core filter only (its schema drops taskIds),
  // so the task listen goes out as a plain request on the same client.
  const listenAbort = new AbortController();
  const listening = worker.client
    .request({ method: "subscriptions/listen", params: { notifications: { taskIds: [taskID] } } }, anyResult, { signal: listenAbort.signal, timeout: 600_000 })
    .catch((e) => e);

  await call("handoff_complete", { handoff_id: handoffID, result: { text: "the plan", artifacts: [] } });

  step("waiting for notifications/tasks completed");
  const note = await completed;
  assert.equal(note.params.taskId, taskID);

  // The creator's execution settles by polling tasks/get through ce mcp.
  step("settle");
  const { outcome } = await exec.settle();
  assert.equal(outcome.status, "completed");
  const result = resultFromTaskOutcome(outcome);
  assert.ok(JSON.stringify(result).includes("the plan"), `the task's result carries the handoff's: ${JSON.stringify(result)}`);
  assert.ok(raw.seen.some((s) => s.request.method === "tasks/get" && s.msg.result?.status === "completed"), "tasks/get went through ce mcp");

  // Aborting the listen sends notifications/cancelled naming it (the SDK's
  // cancellation); ce mcp forwards it and writes nothing more for it.
  step("cancelling the listen");
  const before = frames.length;
  listenAbort.abort("done");
  const ended = await listening;
  assert.ok(ended instanceof Error, `the cancelled listen ends on the client's side: ${JSON.stringify(ended)}`);
  // The room still answers on the same client after the cancellation.
  assert.equal((await call("workspace_status", {})).workspace_id, JSON.parse(readFileSync(worker.state, "utf8")).workspace_id);
  assert.equal(frames.slice(before).filter((f) => f.method === "notifications/tasks").length, 0, "no task frame after the cancellation");

  // The creator cancels a second task through ce mcp (tasks/cancel): the
  // execution settles as cancelled, and the worker sees its handoff cancelled.
  step("tasks/cancel through ce mcp");
  const second = await session.callTool("handoff_create", { summary: "never mind", assignee: workerID });
  assert.equal(second.kind, "task");
  await second.cancel();
  const cancelled = raw.seen.find((s) => s.request.method === "tasks/cancel");
  assert.ok(cancelled && !cancelled.msg.error, `tasks/cancel went through ce mcp and was acknowledged: ${JSON.stringify(cancelled?.msg)}`);
  assert.equal(cancelled.request.params.taskId, second.handle.taskId);
  const settled = await second.settle();
  assert.equal(settled.outcome.status, "cancelled", `the execution settles cancelled: ${JSON.stringify(settled.outcome)}`);
  const made = raw.seen.filter((s) => s.request.method === "tools/call").at(-1);
  const secondID = made.msg.result._meta["commonroom/handoff_id"];
  assert.notEqual(secondID, handoffID);
  assert.equal((await call("handoff_get", { handoff_id: secondID })).status, "cancelled", "the worker sees the handoff cancelled");
});
