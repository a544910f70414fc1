// ce mcp under @modelcontextprotocol/sdk 1.x (Client + StdioClientTransport),
// the library most JavaScript hosts embed. It starts with `initialize` and
// negotiates 2025-11-25; every answer goes through the SDK's own zod result
// schemas (callTool, listTools, subscribeResource, readResource, ping, …),
// never a permissive one.
//
// Three hosts, each launching its own `ce mcp` with its own state file, take
// a handoff through its whole lifecycle with tools only (../lib/handoff.mjs):
// create as one agent, accept as another, the worker asks for input, the
// requester answers with handoff_answer, the worker completes, a participant
// with approve approves; a second handoff is cancelled by its owner with
// handoff_cancel. The worker follows the document with resources/subscribe
// and sees an edit made to the Markdown file from outside.
//
// Run by scripts/mcp-clients.sh, which starts the room and sets CE_BIN,
// CE_DOC, CE_STATE_DIR and CE_INVITE_{CREATOR,WORKER,APPROVER}.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { cancelledByTool, editOutside, env, lifecycleTools, participantOf, toolsOnlyLifecycle, within, wireLog } from "../lib/handoff.mjs";

const ce = env("CE_BIN");
const verbose = !!process.env.CE_MCP_CLIENTS_VERBOSE;
const step = (what) => verbose && console.error(`# sdk1: ${what}`);
const hosts = [];

// host starts one `ce mcp` through the SDK's stdio transport. Its wire is
// recorded for the failure report.
async function host(name, invite) {
  const state = join(env("CE_STATE_DIR"), `${name}.json`);
  const args = ["mcp", invite, "--name", name, "--state", state, ...(verbose ? ["--log-level", "debug"] : [])];
  const transport = new StdioClientTransport({ command: ce, args, stderr: "inherit" });
  const wire = wireLog();
  const send = transport.send.bind(transport);
  transport.send = (m, o) => (wire.record("-> ", m), send(m, o));
  const start = transport.start.bind(transport);
  transport.start = () => {
    const on = transport.onmessage;
    transport.onmessage = (m, e) => (wire.record("<- ", m), on(m, e));
    return start();
  };
  const client = new Client({ name: `ce-sdk1-${name}`, version: "1.0.0" });
  const h = { name, state, client, wire };
  hosts.push(h);
  await client.connect(transport);
  return h;
}

// call is tools/call through the SDK's callTool (CallToolResultSchema, and
// the tool's outputSchema when tools/list gave one); an isError result
// fails the test. It returns structuredContent.
async function call(h, name, args) {
  const res = await h.client.callTool({ name, arguments: args });
  assert.equal(res.isError, false, `${h.name}: ${name}: ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent, `${h.name}: ${name} has structuredContent: ${JSON.stringify(res)}`);
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, `${name}: the text block is the same JSON`);
  return res.structuredContent;
}

test("@modelcontextprotocol/sdk 1.x: initialize, the whole handoff with tools only, a subscription that sees an outside edit", async (t) => {
  t.after(async () => {
    for (const h of hosts) await h.client.close();
  });
  try {
    await lifecycle();
  } catch (e) {
    for (const h of hosts) console.error(`# sdk1 ${h.name}: the last messages on the wire (-> to ce mcp, <- from it):\n${h.wire.lines.join("\n")}`);
    throw e;
  }
});

async function lifecycle() {
  step("connecting three hosts");
  const creator = await host("creator", env("CE_INVITE_CREATOR"));
  const worker = await host("worker", env("CE_INVITE_WORKER"));
  const approver = await host("approver", env("CE_INVITE_APPROVER"));

  // What initialize negotiated, as the bridge answered it.
  const init = creator.wire.lines.map((l) => JSON.parse(l.slice(3))).find((m) => m.id !== undefined && m.result?.protocolVersion);
  assert.equal(init?.result.protocolVersion, "2025-11-25", `initialize: ${JSON.stringify(init)}`);
  const caps = creator.client.getServerCapabilities();
  assert.ok(caps?.tools && caps?.prompts && caps?.resources?.subscribe === true, `capabilities tools, prompts, resources{subscribe}: ${JSON.stringify(caps)}`);
  assert.ok(creator.client.getServerVersion()?.name, "serverInfo");
  assert.ok((creator.client.getInstructions() ?? "").trim().length > 0, "instructions");

  step("ping, logging/setLevel, prompts/list, tools/list");
  // Their results go through the SDK's EmptyResultSchema (strict: _meta only).
  await creator.client.ping();
  await creator.client.setLoggingLevel("info");
  const prompts = await creator.client.listPrompts();
  assert.ok(prompts.prompts.length > 0, "prompts/list names the room's prompts");
  const prompt = await creator.client.getPrompt({ name: prompts.prompts[0].name, arguments: {} });
  assert.ok(prompt.messages.length > 0, `prompts/get ${prompts.prompts[0].name}`);
  const resources = await creator.client.listResources();
  assert.ok(resources.resources.some((r) => r.uri.startsWith("commonroom://workspace/")), `resources/list names the document: ${JSON.stringify(resources)}`);
  // The agent guide as a skill resource, found and read the way hosts do.
  const skill = resources.resources.find((r) => r.uri === "skill://commonroom/SKILL.md");
  assert.equal(skill?.mimeType, "text/markdown", `resources/list names the guide: ${JSON.stringify(resources)}`);
  const guide = await creator.client.readResource({ uri: skill.uri });
  assert.ok(guide.contents[0].text.includes("handoff_answer"), "the guide teaches the tools-only workflow");
  const templates = await creator.client.listResourceTemplates();
  assert.ok(templates.resourceTemplates.length > 0, "resources/templates/list names the section template");
  for (const h of [creator, worker, approver]) {
    // listTools also primes the SDK's output-schema validators for callTool.
    const names = (await h.client.listTools()).tools.map((x) => x.name);
    for (const n of lifecycleTools) assert.ok(names.includes(n), `${h.name}: tools/list names ${n}: ${names.join(" ")}`);
  }
  const ids = { creator: participantOf(creator.state), worker: participantOf(worker.state), approver: participantOf(approver.state) };
  const { workspace_id: workspaceID } = await call(creator, "workspace_status", {});
  assert.match(workspaceID, /^workspace_/);

  step("the handoff");
  const { id, elapsedMs } = await toolsOnlyLifecycle({ label: "sdk1", call, creator, worker, approver, ids, step });
  console.log(`lifecycle wall time: sdk1(2025-11-25) ${Math.round(elapsedMs)} ms`);

  // The task exists, but a host of this era has no tasks/*: the SDK's own
  // tasks/get is a method not found.
  const { task_id: taskID } = await call(creator, "handoff_get", { handoff_id: id });
  await assert.rejects(creator.client.experimental.tasks.getTask(taskID), (e) => {
    assert.ok(e instanceof McpError, `tasks/get: ${e}`);
    assert.equal(e.code, -32601, `tasks/get from a 2025-11-25 host: ${e.message}`);
    return true;
  });

  step("a second handoff, cancelled by its owner");
  await cancelledByTool({ label: "sdk1", call, creator, worker, ids });

  step("resources/subscribe and an edit from outside");
  const uri = `commonroom://workspace/${workspaceID}`;
  let updated;
  const sawUpdate = new Promise((resolve) => (updated = resolve));
  worker.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => n.params.uri === uri && updated(n));
  await worker.client.subscribeResource({ uri });
  const marker = `edited outside for sdk1 at ${Date.now()}`;
  editOutside(marker);
  await within(20000, `notifications/resources/updated for ${uri}`, sawUpdate);
  const read = await worker.client.readResource({ uri });
  assert.ok(read.contents[0].text.includes(marker), `resources/read after the edit has it: ${JSON.stringify(read).slice(0, 500)}`);
  await worker.client.unsubscribeResource({ uri });
}
