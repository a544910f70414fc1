// ce mcp under the MCP Inspector's CLI mode (@modelcontextprotocol/inspector,
// pinned in package-lock.json), what people use to try a server:
//
//   mcp-inspector --cli --method tools/call --tool-name NAME --tool-arg k=v -- ce mcp INVITE --state FILE
//
// Each call is its own inspector process with its own `ce mcp`, in the
// inspector's default protocol era for a command target (legacy: it starts
// with initialize); the same state file brings back the same participant.
// Three such participants take a handoff through its whole lifecycle with
// tools only (../lib/handoff.mjs), a second handoff is cancelled with
// handoff_cancel, and resources/read sees an edit made to the Markdown file
// from outside. The CLI mode has no resources/subscribe (it runs one method
// and exits), so the subscription is made with the package's other CLI,
// mcpdo, whose daemon holds one connection (`mcpdo connect -- ce mcp …`,
// then `mcpdo resources/subscribe URI`, which streams until interrupted).
// Every inspector process runs with HOME in the test's state directory and
// a private mcpdo daemon, stopped at the end.
//
// Run by scripts/mcp-clients.sh, which starts the room and sets CE_BIN,
// CE_DOC, CE_STATE_DIR and CE_INVITE_{CREATOR,WORKER,APPROVER}.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { cancelledByTool, editOutside, env, lifecycleTools, participantOf, toolsOnlyLifecycle, within } from "../lib/handoff.mjs";

const require = createRequire(import.meta.url);
const pkg = require.resolve("@modelcontextprotocol/inspector/package.json");
const bin = join(dirname(pkg), require(pkg).bin["mcp-inspector"]);
const mcpdoBin = join(dirname(pkg), require(pkg).bin["mcpdo"]);
const ce = env("CE_BIN");
const verbose = !!process.env.CE_MCP_CLIENTS_VERBOSE;
const step = (what) => verbose && console.error(`# inspector: ${what}`);
const runs = []; // every inspector command line with what it printed, for the failure report

// The inspector keeps its catalog, settings and mcpdo's daemon under HOME:
// one of the test's own, and no keychain.
const home = join(env("CE_STATE_DIR"), "home");
mkdirSync(home, { recursive: true, mode: 0o700 });
const childEnv = { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, "mcp.json"), MCP_INSPECTOR_SECRET_STORE: "memory" };

const role = (name, invite) => ({ name, invite, state: join(env("CE_STATE_DIR"), `${name}.json`) });

// inspect runs one `mcp-inspector --cli` process against its own `ce mcp`
// and returns the result it printed (--format json prints {"result": …}).
function inspect(h, method, extra = [], { era } = {}) {
  const args = [bin, "--cli", "--format", "json", "--method", method, ...extra, ...(era ? ["--protocol-era", era] : []), "--", ce, "mcp", h.invite, "--name", h.name, "--state", h.state];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env: childEnv, timeout: 60000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const shown = ["mcp-inspector", "--cli", "--format", "json", "--method", method, ...extra, ...(era ? ["--protocol-era", era] : []), "-- ce mcp INVITE --name", h.name, "--state", h.state].join(" ");
      runs.push(`$ ${shown}\n  exit ${err ? (err.code ?? err.signal) : 0}\n  stdout: ${stdout.slice(0, 2000)}\n  stderr: ${stderr.slice(0, 2000)}`);
      if (runs.length > 30) runs.shift();
      if (err) return reject(new Error(`${shown}: exit ${err.code ?? err.signal}: ${stderr || stdout}`));
      try {
        resolve(JSON.parse(stdout).result);
      } catch (e) {
        reject(new Error(`${shown}: stdout is not {"result":…}: ${stdout}`));
      }
    });
  });
}

// call is --method tools/call with each argument as --tool-arg key=value
// (the CLI parses a value as JSON when it can, so objects and arrays go as
// their JSON text). It returns structuredContent.
async function call(h, name, args) {
  const extra = ["--tool-name", name];
  for (const [k, v] of Object.entries(args)) extra.push("--tool-arg", `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
  const res = await inspect(h, "tools/call", extra);
  assert.equal(res.isError, false, `${h.name}: ${name}: ${JSON.stringify(res)}`);
  assert.ok(res.structuredContent, `${h.name}: ${name} has structuredContent: ${JSON.stringify(res)}`);
  return res.structuredContent;
}

// mcpdo runs one mcpdo command (with the private daemon's environment) and
// returns what it printed on stdout.
function mcpdo(args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [mcpdoBin, ...args], { env: childEnv, timeout: 60000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const shown = `mcpdo ${args.join(" ")}`.replace(/commonroom:\/\/join\/\S+/, "INVITE");
      runs.push(`$ ${shown}\n  exit ${err ? (err.code ?? err.signal) : 0}\n  stdout: ${stdout.slice(0, 2000)}\n  stderr: ${stderr.slice(0, 2000)}`);
      if (err) return reject(new Error(`${shown}: exit ${err.code ?? err.signal}: ${stderr || stdout}`));
      resolve(stdout);
    });
  });
}

// privateDaemon points every later mcpdo at a daemon of this test's own
// (`mcpdo private` prints its exports) and returns how to stop it.
async function privateDaemon() {
  const exports = await mcpdo(["private"]);
  for (const [, k, v] of exports.matchAll(/export (MCP_INSPECTOR_DAEMON_\w+)='([^']*)'/g)) childEnv[k] = v;
  assert.ok(childEnv.MCP_INSPECTOR_DAEMON_DIR && childEnv.MCP_INSPECTOR_DAEMON_TOKEN, `mcpdo private: ${exports}`);
  const dir = childEnv.MCP_INSPECTOR_DAEMON_DIR;
  return async () => {
    await stopDaemon();
    rmSync(dir, { recursive: true, force: true });
  };
}

// stopDaemon asks the private daemon to stop; one that did not go is ended
// by the pid in its lock file.
async function stopDaemon() {
  await mcpdo(["--format", "json", "daemon", "stop"]).catch((e) => console.error(`# inspector: ${e.message}`));
  let pid;
  try {
    pid = +readFileSync(join(childEnv.MCP_INSPECTOR_DAEMON_DIR, "mcpdod.lock"), "utf8").trim();
  } catch {
    return;
  }
  for (let i = 0; i < 50 && pid > 0; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (pid > 0) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

// subscribeOutside: mcpdo connects the worker (its daemon runs the worker's
// `ce mcp` on the same state file: the same participant), subscribes to the
// document, the test edits the file from outside, and the subscription
// prints the update. resources/read then shows the edit.
async function subscribeOutside(worker, uri) {
  const connected = JSON.parse(await mcpdo(["--format", "json", "connect", "--", ce, "mcp", worker.invite, "--name", worker.name, "--state", worker.state]));
  assert.equal(connected.protocolEra, "legacy", `mcpdo's default era for a command is initialize: ${JSON.stringify(connected)}`);
  const child = spawn(process.execPath, [mcpdoBin, "--format", "json", "--connection", connected.name, "resources/subscribe", uri], { env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
  const seen = (re, what) =>
    within(20000, what, new Promise((resolve, reject) => {
      const check = () => re.test(out) && resolve();
      child.stdout.on("data", check);
      exited.then((code) => reject(new Error(`mcpdo resources/subscribe exited ${code}: ${out} ${err}`)));
      check();
    }));
  child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d) => (err += d));
  try {
    await seen(/"type":\s*"subscribed"/, "mcpdo resources/subscribe: subscribed");
    const marker = `edited outside for mcpdo at ${Date.now()}`;
    editOutside(marker);
    await seen(new RegExp(`"type":\\s*"resources/updated",\\s*"uri":\\s*"${uri}"`), `mcpdo resources/subscribe: resources/updated for ${uri}`);
    const read = JSON.parse(await mcpdo(["--format", "json", "--connection", connected.name, "resources/read", uri]));
    assert.ok(JSON.stringify(read).includes(marker), `mcpdo resources/read after the edit: ${JSON.stringify(read).slice(0, 500)}`);
  } finally {
    runs.push(`$ mcpdo resources/subscribe ${uri}\n  stdout: ${out.slice(0, 2000)}\n  stderr: ${err.slice(0, 2000)}`);
    child.kill("SIGINT");
    await within(10000, "mcpdo resources/subscribe ends on SIGINT", exited).catch(() => child.kill("SIGKILL"));
  }
  await mcpdo(["--format", "json", "disconnect", connected.name]);
}

test("the MCP Inspector's CLI: initialize, the whole handoff with tools only, resources/read after an outside edit; mcpdo's subscription", async (t) => {
  const stop = await privateDaemon();
  t.after(stop);
  try {
    await lifecycle();
  } catch (e) {
    console.error(`# inspector: the last runs\n${runs.join("\n")}`);
    throw e;
  }
});

async function lifecycle() {
  const creator = role("creator", env("CE_INVITE_CREATOR"));
  const worker = role("worker", env("CE_INVITE_WORKER"));
  const approver = role("approver", env("CE_INVITE_APPROVER"));

  step("initialize");
  const init = await inspect(creator, "initialize");
  assert.match(init.protocolVersion ?? "", /^2025-/, `the inspector's default era for a command is initialize: ${JSON.stringify(init)}`);
  assert.ok(init.serverInfo?.name, "serverInfo");
  assert.ok(init.capabilities?.tools && init.capabilities?.prompts && init.capabilities?.resources?.subscribe === true, `capabilities: ${JSON.stringify(init.capabilities)}`);
  assert.ok((init.instructions ?? "").trim().length > 0, "instructions");

  step("tools/list, prompts/list, logging/setLevel, resources/list");
  for (const h of [creator, worker, approver]) {
    const names = (await inspect(h, "tools/list")).tools.map((x) => x.name);
    for (const n of lifecycleTools) assert.ok(names.includes(n), `${h.name}: tools/list names ${n}: ${names.join(" ")}`);
  }
  assert.ok((await inspect(creator, "prompts/list")).prompts.length > 0, "prompts/list");
  // The inspector sends logging/setLevel only to a server whose capabilities
  // name logging (without it the CLI refuses the method itself): ce mcp
  // offers logging to hosts of this era for that reason.
  assert.ok(init.capabilities.logging, `initialize names logging: ${JSON.stringify(init.capabilities)}`);
  await inspect(creator, "logging/setLevel", ["--log-level", "info"]);
  const ids = { creator: participantOf(creator.state), worker: participantOf(worker.state), approver: participantOf(approver.state) };
  const { workspace_id: workspaceID } = await call(creator, "workspace_status", {});
  const uri = `commonroom://workspace/${workspaceID}`;
  const listed = await inspect(worker, "resources/list");
  assert.ok(listed.resources.some((r) => r.uri === uri), `resources/list names ${uri}: ${JSON.stringify(listed)}`);

  step("the handoff");
  const { elapsedMs } = await toolsOnlyLifecycle({ label: "inspector", call, creator, worker, approver, ids, step });
  console.log(`lifecycle wall time: inspector-cli(${init.protocolVersion}) ${Math.round(elapsedMs)} ms`);

  step("a second handoff, cancelled by its owner");
  await cancelledByTool({ label: "inspector", call, creator, worker, ids });

  step("resources/read before and after an edit from outside");
  const marker = `edited outside for the inspector at ${Date.now()}`;
  const before = await inspect(worker, "resources/read", ["--uri", uri]);
  assert.ok(!before.contents[0].text.includes(marker));
  editOutside(marker);
  // The room takes the save as a new version when its watcher sees it; a
  // one-shot CLI cannot wait on a subscription, so it reads again.
  const deadline = Date.now() + 20000;
  for (;;) {
    const after = await inspect(worker, "resources/read", ["--uri", uri]);
    if (after.contents[0].text.includes(marker)) break;
    assert.ok(Date.now() < deadline, `resources/read has not shown the edit 20 s after it: ${JSON.stringify(after).slice(0, 500)}`);
  }

  step("mcpdo: resources/subscribe sees an edit from outside");
  await subscribeOutside(worker, uri);

  step("--protocol-era auto picks 2026-07-28 through server/discover");
  const auto = await inspect(creator, "initialize", [], { era: "auto" });
  assert.equal(auto.protocolVersion, "2026-07-28", JSON.stringify(auto));
}
