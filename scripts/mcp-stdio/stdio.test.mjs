// ce mcp driven by the official MCP client library, @modelcontextprotocol/client
// 2.x with @modelcontextprotocol/ext-tasks, over stdio: three hosts (creator,
// worker, approver), each launching its own `ce mcp` as an MCP server
// process.
//
// 1. Pinned to 2026-07-28 with the Tasks extension: the creator hands work
//    to the worker through ext-tasks (a task handle, followed on a
//    subscriptions/listen and settled with tasks/get); the worker accepts
//    and asks for input; ext-tasks hands the question to the creator's
//    onInputRequest and answers it with tasks/update; the worker completes
//    and the approver approves. A second handoff's task is cancelled by its
//    creator with tasks/cancel. The worker follows the document on a
//    subscriptions/listen and sees an edit made to the file from outside.
// 2. The same client in its default negotiation mode ('legacy': it starts
//    with initialize), as hosts on 2.x defaults run it: the whole handoff
//    with tools only (handoff_answer, handoff_cancel) and resources/subscribe.
//
// Run by scripts/mcp-clients.sh (or scripts/mcp-stdio.sh), which starts the
// room and sets CE_BIN, CE_DOC, CE_STATE_DIR and CE_INVITE_{CREATOR,WORKER,APPROVER}.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";
import { cancelledByTool, editOutside, env, getHandoff, lifecycleTools, participantOf, toolsOnlyLifecycle, within, wireLog } from "../mcp-clients/lib/handoff.mjs";

const VERSION = "2026-07-28";
// anyResult is a Standard Schema that accepts any result.
const anyResult = { "~standard": { version: 1, vendor: "ce-tests", validate: (value) => ({ value }) } };
const TASKS = "io.modelcontextprotocol/tasks";
const caps = { extensions: { [TASKS]: {} } };
const ce = env("CE_BIN");
const verbose = !!(process.env.CE_MCP_CLIENTS_VERBOSE || process.env.CE_MCP_STDIO_VERBOSE);
const step = (what) => verbose && console.error(`# client2: ${what}`);
const stateDir = env("CE_STATE_DIR");
const hosts = [];

// host starts one `ce mcp` through the SDK's stdio transport: pinned to
// 2026-07-28 with the Tasks extension, or (pinned false) in the client's
// default negotiation mode with no extension. Its wire is recorded for the
// failure report.
async function host(name, invite, { pinned = true } = {}) {
  const state = join(stateDir, `${name}.json`);
  const options = pinned ? { capabilities: caps, versionNegotiation: { mode: { pin: VERSION } } } : {};
  const client = new Client({ name, version: "1.0.0" }, options);
  const logs = verbose ? ["--log-level", "debug"] : [];
  const transport = new StdioClientTransport({ command: ce, args: ["mcp", invite, "--name", name, "--state", state, ...logs], stderr: "inherit" });
  const wire = wireLog();
  const send = transport.send.bind(transport);
  transport.send = (m, o) => (wire.record("-> ", m), send(m, o));
  const start = transport.start.bind(transport);
  transport.start = () => {
    const on = transport.onmessage;
    transport.onmessage = (m, e) => (wire.record("<- ", m), on(m, e));
    return start();
  };
  const h = { name: `${name}${pinned ? "" : " (default mode)"}`, client, state, wire, info: { name, version: "1.0.0" } };
  hosts.push(h);
  await client.connect(transport);
  return h;
}

// lineDispatcher is the host-owned request path ext-tasks needs for the
// 2026-07-28 task wire shapes: a second `ce mcp` on the same state file (so
// the same session and participant), spoken to line by line.
function lineDispatcher(invite, state) {
  const child = spawn(ce, ["mcp", invite, "--state", state], { stdio: ["pipe", "pipe", "inherit"] });
  const pending = new Map();
  let next = 1;
  const seen = [];
  const wire = wireLog();
  hosts.push({ name: "creator's dispatcher", wire });
  createInterface({ input: child.stdout }).on("line", (line) => {
    wire.record("<- ", line);
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
      const line = JSON.stringify({ jsonrpc: "2.0", id, ...request });
      wire.record("-> ", line);
      child.stdin.write(line + "\n");
    });
  const close = () =>
    new Promise((resolve) => {
      child.on("exit", (code) => resolve(code));
      child.stdin.end();
    });
  return { dispatch, seen, close };
}

// dumpOnFailure runs body; on failure it prints every host's last messages.
async function dumpOnFailure(body) {
  try {
    await body();
  } catch (e) {
    for (const h of hosts) console.error(`# client2 ${h.name}: the last messages on the wire (-> to ce mcp, <- from it):\n${h.wire.lines.join("\n")}`);
    throw e;
  } finally {
    hosts.length = 0;
  }
}

// call is tools/call through the client's callTool; an isError result fails
// the test. It returns structuredContent.
async function call(h, name, args) {
  const res = await h.client.callTool({ name, arguments: args });
  assert.equal(res.isError, false, `${h.name}: ${name}: ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent, `${h.name}: ${name} has structuredContent: ${JSON.stringify(res)}`);
  return res.structuredContent;
}

// until polls check every 100 ms for at most ms.
async function until(ms, what, check) {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await check();
    if (got) return got;
    assert.ok(Date.now() < deadline, `${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("2026-07-28 with ext-tasks: a task-backed handoff answered with tasks/update and approved, tasks/cancel, listens for the task and the document", async (t) => {
  const closers = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c();
  });
  await dumpOnFailure(async () => {
    step("connecting the creator, the worker and the approver");
    const creator = await host("creator", env("CE_INVITE_CREATOR"));
    const worker = await host("worker", env("CE_INVITE_WORKER"));
    const approver = await host("approver", env("CE_INVITE_APPROVER"));
    closers.push(() => creator.client.close(), () => worker.client.close(), () => approver.client.close());
    assert.equal(creator.client.getNegotiatedProtocolVersion(), VERSION);

    step("tools/list");
    const tools = await worker.client.listTools();
    for (const n of lifecycleTools) assert.ok(tools.tools.some((x) => x.name === n), `tools/list through ce mcp names ${n}`);
    const ids = { creator: participantOf(creator.state), worker: participantOf(worker.state), approver: participantOf(approver.state) };
    const { workspace_id: workspaceID } = await call(worker, "workspace_status", {});

    // The creator's input handler: ext-tasks calls it when the task asks.
    const answer = "the town hall (client2, tasks/update)";
    const asked = [];
    let sawQuestion;
    const questioned = new Promise((resolve) => (sawQuestion = resolve));
    const onInputRequest = async (request, context) => {
      asked.push({ request, context });
      sawQuestion();
      return { action: "accept", content: { answer } };
    };

    const raw = lineDispatcher(env("CE_INVITE_CREATOR"), creator.state);
    const session = createTaskSessionFromClient(creator.client, {
      endpointId: "ce-mcp-stdio-creator",
      rawDispatch: raw.dispatch,
      v2RequestFraming: { protocolVersion: VERSION, clientInfo: creator.info, clientCapabilities: caps },
      onInputRequest,
    });
    closers.push(async () => {
      await session.close();
      assert.equal(await raw.close(), 0, "the dispatcher's ce mcp exits 0 at the end of its stdin");
    });

    step("handoff_create through ext-tasks");
    const start = performance.now();
    const exec = await session.callTool("handoff_create", { summary: "write the plan (client2)", assignee: ids.worker });
    assert.equal(exec.kind, "task", "handoff_create with the Tasks extension is task-backed");
    const taskID = exec.handle.taskId;
    const created = raw.seen.find((s) => s.request.method === "tools/call");
    const handoffID = created.msg.result._meta["commonroom/handoff_id"];
    assert.match(handoffID, /^handoff_/);

    // The creator follows its task on a listen through its own ce mcp, so
    // ext-tasks sees input_required and completed as they happen. Its
    // notifications reach ext-tasks through the client the session wraps.
    // Client.listen() carries the core filter only (its schema drops
    // taskIds), so the task listen goes out as a plain request.
    const creatorListen = new AbortController();
    const creatorListening = creator.client
      .request({ method: "subscriptions/listen", params: { notifications: { taskIds: [taskID] } } }, anyResult, { signal: creatorListen.signal, timeout: 600_000 })
      .catch((e) => e);
    closers.push(async () => {
      creatorListen.abort("done");
      await creatorListening;
    });
    const settling = exec.settle();

    // The worker follows the task on a listen stream through its own ce mcp.
    const frames = [];
    let sawCompleted;
    const completed = new Promise((resolve) => (sawCompleted = resolve));
    worker.client.fallbackNotificationHandler = async (n) => {
      frames.push(n);
      if (n.method === "notifications/tasks" && n.params?.taskId === taskID && n.params?.status === "completed") sawCompleted(n);
    };
    assert.equal((await call(worker, "handoff_accept", { handoff_id: handoffID })).status, "accepted");
    // The task is the worker's once it accepted: now it may follow it.
    step("listen");
    const listenAbort = new AbortController();
    const listening = worker.client
      .request({ method: "subscriptions/listen", params: { notifications: { taskIds: [taskID] } } }, anyResult, { signal: listenAbort.signal, timeout: 600_000 })
      .catch((e) => e);

    step("handoff_request_input; the creator answers through ext-tasks (tasks/update)");
    await call(worker, "handoff_request_input", { handoff_id: handoffID, requests: [{ key: "venue", message: "Which venue?" }] });
    await within(20000, "ext-tasks asks the creator's onInputRequest", questioned);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].request.kind, "elicitation");
    assert.equal(asked[0].request.params.message, "Which venue?");
    assert.equal(asked[0].context.delivery, "task-update");
    assert.equal(asked[0].context.inputId, "venue");
    const h = await until(20000, "the worker reads the answer", async () => {
      const got = await getHandoff(call, worker, handoffID);
      return got.inputs?.[0]?.status === "answered" && got;
    });
    assert.deepEqual(h.inputs[0].response, { action: "accept", content: { answer } });
    assert.equal(h.task_status, "working");
    // The room commits before it answers, so the worker may read the answer
    // before the creator's dispatcher has read the acknowledgement.
    const update = await until(10000, "the tasks/update answer", () => raw.seen.find((s) => s.request.method === "tasks/update"));
    assert.ok(update && !update.msg.error, `tasks/update went through ce mcp and was acknowledged: ${JSON.stringify(update)}`);
    assert.equal(update.request.params.taskId, taskID);

    step("handoff_complete");
    await call(worker, "handoff_complete", { handoff_id: handoffID, result: { text: `the plan: ${answer}`, artifacts: [] } });
    step("waiting for notifications/tasks completed");
    const note = await within(20000, "notifications/tasks completed on the worker's listen", completed);
    assert.equal(note.params.taskId, taskID);

    // The creator's execution settles (listen and tasks/get through ce mcp).
    step("settle");
    const { outcome } = await within(30000, "the creator's execution settles", settling);
    assert.equal(outcome.status, "completed");
    const result = resultFromTaskOutcome(outcome);
    assert.ok(JSON.stringify(result).includes(`the plan: ${answer}`), `the task's result carries the handoff's: ${JSON.stringify(result)}`);
    // tasks/get through ce mcp, as ext-tasks' task controller asks it.
    const snapshot = await session.task(taskID).snapshot();
    assert.equal(snapshot.status, "completed", JSON.stringify(snapshot));
    assert.ok(raw.seen.some((s) => s.request.method === "tasks/get" && s.msg.result?.status === "completed"), "tasks/get went through ce mcp");

    step("handoff_approve by the approver");
    await call(approver, "handoff_approve", { handoff_id: handoffID });
    const approved = await getHandoff(call, creator, handoffID);
    const elapsedMs = performance.now() - start;
    assert.equal(approved.status, "approved", JSON.stringify(approved));
    assert.equal(approved.decided_by, ids.approver);
    assert.equal(approved.task_status, "completed");
    console.log(`lifecycle wall time: client2(2026-07-28, ext-tasks) ${Math.round(elapsedMs)} ms`);

    // Aborting the listen sends notifications/cancelled naming it (the SDK's
    // cancellation); ce mcp forwards it and writes nothing more for it.
    step("cancelling the listen");
    const before = frames.length;
    listenAbort.abort("done");
    const ended = await listening;
    assert.ok(ended instanceof Error, `the cancelled listen ends on the client's side: ${JSON.stringify(ended)}`);
    // The room still answers on the same client after the cancellation.
    assert.equal((await call(worker, "workspace_status", {})).workspace_id, workspaceID);
    assert.equal(frames.slice(before).filter((f) => f.method === "notifications/tasks").length, 0, "no task frame after the cancellation");

    // The creator cancels a second task through ce mcp (tasks/cancel): the
    // execution settles as cancelled, and the worker sees its handoff cancelled.
    step("tasks/cancel through ce mcp");
    const second = await session.callTool("handoff_create", { summary: "never mind (client2)", assignee: ids.worker });
    assert.equal(second.kind, "task");
    await second.cancel();
    const cancelled = raw.seen.find((s) => s.request.method === "tasks/cancel");
    assert.ok(cancelled && !cancelled.msg.error, `tasks/cancel went through ce mcp and was acknowledged: ${JSON.stringify(cancelled?.msg)}`);
    assert.equal(cancelled.request.params.taskId, second.handle.taskId);
    const settled = await within(30000, "the cancelled execution settles", second.settle());
    assert.equal(settled.outcome.status, "cancelled", `the execution settles cancelled: ${JSON.stringify(settled.outcome)}`);
    const made = raw.seen.filter((s) => s.request.method === "tools/call").at(-1);
    const secondID = made.msg.result._meta["commonroom/handoff_id"];
    assert.notEqual(secondID, handoffID);
    const gone = await getHandoff(call, worker, secondID);
    assert.equal(gone.status, "cancelled", "the worker sees the handoff cancelled");
    assert.equal(gone.cancelled_by, ids.creator);

    step("a listen on the document sees an edit from outside");
    const uri = `commonroom://workspace/${workspaceID}`;
    let updated;
    const sawUpdate = new Promise((resolve) => (updated = resolve));
    worker.client.setNotificationHandler("notifications/resources/updated", (n) => n.params.uri === uri && updated(n));
    const sub = await worker.client.listen({ resourceSubscriptions: [uri] });
    assert.deepEqual(sub.honoredFilter.resourceSubscriptions, [uri], `the room acknowledges the document: ${JSON.stringify(sub.honoredFilter)}`);
    const marker = `edited outside for client2 at ${Date.now()}`;
    editOutside(marker);
    await within(20000, `notifications/resources/updated for ${uri}`, sawUpdate);
    const read = await worker.client.readResource({ uri });
    assert.ok(read.contents[0].text.includes(marker), `resources/read after the edit has it: ${JSON.stringify(read).slice(0, 500)}`);
    await sub.close();
    assert.equal(await within(10000, "the closed listen ends", sub.closed), "local");
  });
});

test("the same client in its default negotiation mode (initialize): the whole handoff with tools only, resources/subscribe", async (t) => {
  const closers = [];
  t.after(async () => {
    for (const c of closers.reverse()) await c();
  });
  await dumpOnFailure(async () => {
    const creator = await host("creator", env("CE_INVITE_CREATOR"), { pinned: false });
    const worker = await host("worker", env("CE_INVITE_WORKER"), { pinned: false });
    const approver = await host("approver", env("CE_INVITE_APPROVER"), { pinned: false });
    closers.push(() => creator.client.close(), () => worker.client.close(), () => approver.client.close());
    assert.equal(creator.client.getProtocolEra(), "legacy");
    const version = creator.client.getNegotiatedProtocolVersion();
    assert.match(version ?? "", /^2025-/, `the default mode negotiates through initialize: ${version}`);
    const caps = creator.client.getServerCapabilities();
    assert.ok(caps?.tools && caps?.prompts && caps?.resources?.subscribe === true, `capabilities: ${JSON.stringify(caps)}`);
    assert.ok((creator.client.getInstructions() ?? "").trim().length > 0, "instructions");

    for (const h of [creator, worker, approver]) {
      const names = (await h.client.listTools()).tools.map((x) => x.name);
      for (const n of lifecycleTools) assert.ok(names.includes(n), `${h.name}: tools/list names ${n}`);
    }
    const ids = { creator: participantOf(creator.state), worker: participantOf(worker.state), approver: participantOf(approver.state) };
    const { elapsedMs } = await toolsOnlyLifecycle({ label: "client2-default", call, creator, worker, approver, ids, step });
    console.log(`lifecycle wall time: client2-default(${version}) ${Math.round(elapsedMs)} ms`);
    await cancelledByTool({ label: "client2-default", call, creator, worker, ids });

    const { workspace_id: workspaceID } = await call(worker, "workspace_status", {});
    const uri = `commonroom://workspace/${workspaceID}`;
    let updated;
    const sawUpdate = new Promise((resolve) => (updated = resolve));
    worker.client.setNotificationHandler("notifications/resources/updated", (n) => n.params.uri === uri && updated(n));
    await worker.client.subscribeResource({ uri });
    const marker = `edited outside for client2-default at ${Date.now()}`;
    editOutside(marker);
    await within(20000, `notifications/resources/updated for ${uri}`, sawUpdate);
    const read = await worker.client.readResource({ uri });
    assert.ok(read.contents[0].text.includes(marker), `resources/read after the edit has it: ${JSON.stringify(read).slice(0, 500)}`);
    await worker.client.unsubscribeResource({ uri });
  });
});
