// The room's board as an MCP App in a real browser: Debian's chromium
// driven by playwright-core, with @modelcontextprotocol/ext-apps 2.0.4's own
// host side (AppBridge, bundled by esbuild from app-host/host.mjs) as the
// host, the view behind a sandbox proxy on another origin
// (app-host/sandbox.html) as a web host must, against a real `ce serve`
// that scripts/e2e-app.sh started.
//
// The approver is a real MCP client session: the SDK client
// (@modelcontextprotocol/client 2.4.0) over stdio to `ce mcp`, declaring
// io.modelcontextprotocol/ui. The host page reads nothing itself: the
// bridge's tools/call and resources/read are relayed (page.exposeBinding)
// to that client. The owner and the worker are agents on /mcp that do not
// declare the extension. Steps run in order and share state: once one
// fails, the rest are skipped.
//
// Environment (set by scripts/e2e-app.sh):
//   CE_E2E_BANNER           the one JSON line `ce serve --json` printed
//   CE_E2E_OWNER            the owner agent's session grant (read, propose, …)
//   CE_E2E_WORKER           the worker agent's session grant (read, checkout)
//   CE_E2E_APPROVER_INVITE  an invitation (ce invite --json) with read,approve for `ce mcp`
//   CE_BIN                  the ce binary
//   CE_E2E_STATE_DIR        where `ce mcp` keeps its state file
//   CE_E2E_ARTIFACTS        where screenshots go (default e2e/artifacts)
//   CE_E2E_CHROMIUM         the browser (default /usr/bin/chromium)

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Agent, HANDOFF_META } from './lib/mcp.mjs';
import { UI_TIMEOUT, artifacts, captureProblems, envJSON, eventually, launchPersistent, orderedSteps } from './lib/browser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through scripts/e2e-app.sh`);
  return v;
};
const readJSON = (name) => envJSON(name, 'scripts/e2e-app.sh');

const UI_EXT = 'io.modelcontextprotocol/ui';
const banner = readJSON('CE_E2E_BANNER');
const owner = new Agent('owner', banner.mcp_url, readJSON('CE_E2E_OWNER'));
const worker = new Agent('worker', banner.mcp_url, readJSON('CE_E2E_WORKER'));
const approverInvite = readJSON('CE_E2E_APPROVER_INVITE').uri;

// What the room's people write: script, raw HTML and a javascript: link,
// which the view must show as text and never run or follow.
const HOSTILE = '<script>window.__pwned=1;alert(1)</script><img src=x onerror="window.__pwned=2"> [click](javascript:window.__pwned=3)';

let context;
let page;
let closeBrowser;
let approver; // { client, id }
const dialogs = [];
const pageProblems = [];
const requests = []; // every request the browser made
const relayed = []; // [method, name] the host relayed to the client
let boardURI;
let boardHTML;
let boardCSP;
let handoffID;
let proposalID;
let hostServer; // serves the host page (127.0.0.1) and its sandbox proxy (localhost: another origin)
let hostURL;
let sandboxURL;

// step is one ordered test: skipped once an earlier one failed.
const step = orderedSteps(() => [[page, 'mcp-app-failure.png']]);

const view = () => page.frameLocator('#sandbox').frameLocator('iframe[name="view"]');
const boardCalls = () => relayed.filter(([m, n]) => m === 'tools/call' && n === 'workspace_board').length;

describe('MCP App: the room board in a host', { concurrency: false }, () => {
  before(async () => {
    // The approver: the SDK client over `ce mcp`, declaring MCP Apps.
    const client = new Client({ name: 'ce-e2e-app-host', version: '1.0.0' }, {
      capabilities: { extensions: { [UI_EXT]: { mimeTypes: [RESOURCE_MIME_TYPE] } } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    });
    const state = path.join(env('CE_E2E_STATE_DIR'), 'approver.json');
    await client.connect(new StdioClientTransport({ command: env('CE_BIN'), args: ['mcp', approverInvite, '--name', 'approver', '--state', state], stderr: 'inherit' }));
    // ce mcp joined and wrote its session to the state file: the approver's
    // participant id, which the Approve step pins.
    approver = { client, id: JSON.parse(fs.readFileSync(state, 'utf8')).participant_id };
    assert.match(approver.id, /^participant_/);

    // The test host: its page and script on one origin, the sandbox proxy
    // on another (the same port by another name), as a web host must.
    const bundle = await esbuild.build({ entryPoints: [path.join(here, 'app-host', 'host.mjs')], bundle: true, format: 'iife',
      platform: 'browser', write: false, logLevel: 'warning' });
    const files = {
      '/host.html': ['text/html', '<!doctype html><meta charset="utf-8"><title>test host</title><body><h1>test host</h1><script src="/host.js"></script></body>'],
      '/host.js': ['text/javascript', bundle.outputFiles[0].text],
      '/sandbox.html': ['text/html', fs.readFileSync(path.join(here, 'app-host', 'sandbox.html'), 'utf8')],
    };
    hostServer = http.createServer((req, res) => {
      const f = files[new URL(req.url, 'http://x').pathname];
      if (!f) { res.writeHead(req.url === '/favicon.ico' ? 204 : 404).end(); return; }
      res.writeHead(200, { 'Content-Type': `${f[0]}; charset=utf-8`, 'Cache-Control': 'no-store' });
      res.end(f[1]);
    });
    await new Promise((r) => hostServer.listen(0, '127.0.0.1', r));
    const port = hostServer.address().port;
    hostURL = `http://127.0.0.1:${port}/host.html`;
    sandboxURL = `http://localhost:${port}/sandbox.html`;

    ({ context, page, close: closeBrowser } = await launchPersistent('ce-e2e-app-chromium-', { viewport: { width: 1000, height: 800 } }));
    page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
    // A CSP violation in the view (an inline script or style that its
    // hashes do not allow, say) is reported on the console as an error.
    captureProblems(page, pageProblems);
    context.on('request', (r) => requests.push({ url: r.url(), frame: r.frame().name() }));
    await page.exposeBinding('mcpRelay', async (_source, method, params) => {
      relayed.push([method, params && params.name]);
      if (method === 'tools/call') return approver.client.callTool(params);
      if (method === 'resources/read') return approver.client.readResource(params);
      throw new Error(`the test host relays no ${method}`);
    });
  });

  after(async () => {
    if (closeBrowser) await closeBrowser();
    if (hostServer) hostServer.close();
    if (approver) await approver.client.close().catch(() => {});
  });

  step('the room has a result waiting for approval and a pending proposal, both carrying hostile text', async () => {
    const r = await owner.tool('handoff_create', { summary: `Book the hut ${HOSTILE}` });
    handoffID = r._meta[HANDOFF_META];
    assert.ok(handoffID, `handoff_create: ${JSON.stringify(r)}`);
    await worker.tool('handoff_accept', { handoff_id: handoffID });
    await worker.tool('handoff_complete', { handoff_id: handoffID, result: { text: `Booked for two nights. ${HOSTILE}` } });
    const { version } = await owner.tool('workspace_status', {});
    const p = await owner.tool('workspace_propose', { target: 'Goals', base_version: version, summary: `Sharper goals ${HOSTILE}`,
      change: { section: 'Goals', content: `## Goals\n\nWalk to the ridge. ${HOSTILE}\n\n` } });
    proposalID = p.proposal_id;
    assert.ok(proposalID);
  });

  step('a client that did not declare the extension sees no _meta.ui and no app-only tool, and cannot call it', async () => {
    const { tools } = await owner.rpc('tools/list', {});
    assert.ok(tools.length > 10);
    for (const t of tools) assert.equal(t._meta, undefined, `${t.name} carries _meta`);
    assert.ok(!tools.some((t) => t.name === 'workspace_board'));
    await assert.rejects(owner.rpc('tools/call', { name: 'workspace_board', arguments: {} }), /-32602 unknown tool: workspace_board/);
    await assert.rejects(owner.rpc('resources/read', { uri: 'ui://commonroom/board' }), /-32602 resource not found/);
  });

  step('the declaring client finds the board on the inbox tool and reads it as an MCP App resource', async () => {
    const { tools } = await approver.client.listTools();
    const inbox = tools.find((t) => t.name === 'handoff_list');
    boardURI = inbox?._meta?.ui?.resourceUri;
    assert.equal(boardURI, 'ui://commonroom/board');
    const board = tools.find((t) => t.name === 'workspace_board');
    assert.deepEqual(board?._meta?.ui?.visibility, ['app']);
    const read = await approver.client.readResource({ uri: boardURI });
    const c = read.contents[0];
    assert.equal(c.mimeType, RESOURCE_MIME_TYPE);
    boardHTML = c.text;
    boardCSP = c._meta.ui.csp;
    assert.deepEqual(boardCSP, { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] });
    assert.match(boardHTML, /http-equiv="Content-Security-Policy" content="default-src 'none'/);
  });

  step('the host mounts the view with the ext-apps AppBridge through a sandbox proxy: it initializes and renders the inbox', async () => {
    await page.goto(hostURL);
    await page.evaluate(([html, csp, url]) => window.startHost(html, csp, url), [boardHTML, boardCSP, sandboxURL]);
    await eventually('ui/notifications/initialized', () => page.evaluate(() => window.hostLog.some(([m]) => m === 'initialized')));
    assert.deepEqual(await page.evaluate(() => window.hostLog.slice(0, 2).map(([m]) => m)), ['sandboxready', 'initialized']);
    const card = view().locator(`#waiting article[data-handoff-id="${handoffID}"]`);
    await card.waitFor({ timeout: UI_TIMEOUT });
    assert.equal(await card.locator('h3').textContent(), `Book the hut ${HOSTILE}`);
    assert.equal(await card.locator('.result').textContent(), `Booked for two nights. ${HOSTILE}`);
    const prop = view().locator(`#proposals article[data-proposal-id="${proposalID}"]`);
    await prop.waitFor({ timeout: UI_TIMEOUT });
    assert.ok((await prop.locator('pre.diff .add').allTextContents()).includes(`+Walk to the ridge. ${HOSTILE}`));
    assert.match(await view().locator('#who').textContent(), /^You are participant_\S+ \(read, approve\)\.$/);
    assert.ok(boardCalls() >= 1, 'the view read the board through the host');
    const frame = page.frame({ name: 'view' });
    assert.equal(await frame.evaluate(() => getComputedStyle(document.body).color), 'rgb(10, 20, 30)', 'the host\'s theme variables apply');
    assert.ok(await page.evaluate(() => window.hostSize && window.hostSize.height > 0), 'the view reported its size');
    await page.screenshot({ path: path.join(artifacts, 'mcp-app-board.png'), fullPage: true });
  });

  step('hostile text stays inert: no script ran, no element or link was made from it, nothing was fetched', async () => {
    const frame = page.frame({ name: 'view' });
    assert.ok(frame);
    const dom = await frame.evaluate(() => ({
      pwned: window.__pwned, scripts: document.scripts.length, imgs: document.images.length, links: document.links.length,
      anchors: document.querySelectorAll('a').length,
    }));
    assert.deepEqual(dom, { pwned: undefined, scripts: 1, imgs: 0, links: 0, anchors: 0 });
    assert.deepEqual(dialogs, []);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(requests.filter((r) => r.frame === 'view'), [], 'the view made no request');
    assert.deepEqual([...new Set(requests.map((r) => r.url))].sort(), [hostURL.replace('host.html', 'host.js'), hostURL, sandboxURL].sort(),
      'the browser fetched the test host and its proxy, nothing else');
  });

  step('postMessage from a frame that is not the host is ignored', async () => {
    const before = boardCalls();
    const renders = async () => Number(await view().locator('body').getAttribute('data-renders'));
    const rendered = await renders();
    await page.evaluate(() => window.spoofStart());
    await eventually('the forger to be posting', async () => (await page.evaluate(() => window.spoofCount())) > 40);
    // While the forger posts, the host (and only the host) tells the view a
    // linked tool answered: the view reads the board again and renders it.
    await page.evaluate(() => window.bridge.sendToolResult({ content: [{ type: 'text', text: '{}' }] }));
    await eventually('the view to read the board again', () => boardCalls() > before);
    await eventually('the view to render the answer', async () => (await renders()) > rendered);
    const sent = await page.evaluate(() => window.spoofStop());
    assert.ok(sent > 40, `the forger sent ${sent} messages`);
    const text = await view().locator('body').textContent();
    assert.ok(!text.includes('FORGED'), 'a forged answer was rendered');
    assert.equal(await view().locator('article[data-handoff-id="forged"]').count(), 0);
    assert.equal(boardCalls(), before + 1, 'forged tool-result notifications made the view read again');
  });

  step('Approve in the view approves the result in the room (handoff_get) with the approver\'s session', async () => {
    const card = view().locator(`#waiting article[data-handoff-id="${handoffID}"]`);
    await card.getByRole('button', { name: 'Approve' }).click();
    const h = await eventually('the handoff to be approved', async () => {
      const x = await owner.handoffGet(handoffID);
      return x.status === 'approved' ? x : null;
    });
    assert.equal(h.decided_by, approver.id, 'decided by the session the host relayed the click on');
    assert.deepEqual(relayed.filter(([m, n]) => n === 'handoff_approve'), [['tools/call', 'handoff_approve']]);
    await eventually('the view to show it done', async () => (await view().locator('#status').textContent()) === 'Approve: done.');
    assert.equal(await view().locator(`#waiting article[data-handoff-id="${handoffID}"]`).count(), 0, 'the approved result left "Waiting for you"');
    assert.deepEqual(pageProblems, []);
    await page.screenshot({ path: path.join(artifacts, 'mcp-app-approved.png'), fullPage: true });
  });
});
