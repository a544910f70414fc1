// A participant's page in a real browser (issue 28): Debian's chromium driven
// by playwright-core, against a real `ce serve` that scripts/e2e.sh started,
// with three people it joined with the real `ce join` binary, each holding
// the Page: link it printed: a writer (read,propose,checkout), an approver
// (read,observe,approve), a reader (read) and a helper who takes on a
// handoff (read,observe,checkout). Each person is a browser
// context of its own (its own cookie jar), as three machines would be. Steps
// run in order and share state: once one fails, the rest are skipped.
//
// Environment (set by scripts/e2e.sh):
//   CE_E2E_P_BANNER    the one JSON line `ce serve --json` printed
//   CE_E2E_P_WRITER    `ce join --json` of the writer (page_url, session_token)
//   CE_E2E_P_APPROVER  `ce join --json` of the approver
//   CE_E2E_P_READER    `ce join --json` of the reader
//   CE_E2E_P_HELPER    `ce join --json` of a helper (read,observe,checkout)
//   CE_E2E_ARTIFACTS   where screenshots go (default e2e/artifacts)
//   CE_E2E_CHROMIUM    the browser (default /usr/bin/chromium)

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { UI_TIMEOUT, artifacts, captureProblems, envJSON, eventually, launch, orderedSteps } from './lib/browser.mjs';

const readJSON = (name) => envJSON(name, 'scripts/e2e.sh');

const banner = readJSON('CE_E2E_P_BANNER');
const writer = readJSON('CE_E2E_P_WRITER');
const approver = readJSON('CE_E2E_P_APPROVER');
const reader = readJSON('CE_E2E_P_READER');
const helper = readJSON('CE_E2E_P_HELPER');
const ingressOrigin = new URL(banner.ingress_url).origin;
const ownerOrigin = new URL(banner.owner_url).origin;
const cookieName = `commonroom_page_${banner.workspace_id}`;

let browser;
const people = {}; // name -> { context, page }
const consoleProblems = [];

// step is one ordered test: skipped once an earlier one failed; a failure
// leaves a screenshot of every person's page.
const step = orderedSteps(() => Object.entries(people).map(([who, p]) => [p.page, `participant-failure-${who}.png`]));

// api is a bearer request to the ingress, as an agent would make it.
async function api(grant, method, route, body) {
  const res = await fetch(banner.ingress_url + route, {
    method,
    headers: { Authorization: `Bearer ${grant.session_token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

// open gives a person a browser of their own and opens their Page: link.
async function open(name, grant) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-GB', timezoneId: 'UTC' });
  const page = await context.newPage();
  captureProblems(page, consoleProblems, { label: `${name}: ` });
  page.on('dialog', (d) => d.dismiss());
  people[name] = { context, page };
  const res = await page.goto(grant.page_url);
  return { context, page, res };
}

// pageFetch is a request made by hand from inside a person's page (same
// origin, so the cookie rides along and the Origin is the page's own).
async function pageFetch(page, method, route, body) {
  return page.evaluate(async ([m, r, b]) => {
    const res = await fetch(r, { method: m, headers: { 'Content-Type': 'application/json' }, body: b === null ? undefined : JSON.stringify(b) });
    let data = null;
    try { data = await res.json(); } catch { /* not JSON */ }
    return { status: res.status, body: data };
  }, [method, route, body === undefined ? null : body]);
}

let proposalID;

describe('participant page', { concurrency: false }, () => {
  before(async () => {
    browser = await launch();
  });

  after(async () => {
    if (browser) await browser.close();
  });

  step('the writer opens the Page: link `ce join` printed: a strict HttpOnly cookie for this room, the page for its capabilities', async () => {
    assert.match(writer.page_url, new RegExp(`^${ingressOrigin}/\\?key=`));
    const { context, page, res } = await open('writer', writer);
    assert.equal(res.status(), 200);
    assert.equal(page.url(), `${ingressOrigin}/`, 'the key is dropped from the address bar');
    const c = (await context.cookies(ingressOrigin)).find((x) => x.name === cookieName);
    assert.ok(c, `the cookie ${cookieName} is set`);
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.equal(await page.evaluate(() => document.cookie), '', 'scripts cannot read the cookie');
    assert.equal(await page.locator('body').getAttribute('data-caps'), 'read propose checkout');
    const h2 = await page.locator('h2').allTextContents();
    assert.deepEqual(h2, ['Connection', 'Handoffs', 'Work on a section', 'Proposals', 'Document', 'Participants', 'Leases', 'Outline', 'Activity'],
      'no invitation section for a session without invite');
    await page.locator('#live[data-state="off"]').waitFor({ timeout: UI_TIMEOUT }); // no observe: it re-reads instead
    await page.locator('#document [data-path]').first().waitFor({ timeout: UI_TIMEOUT });
    assert.match(await page.locator('#you').textContent(), /^Signed in as writer · may read, propose, checkout$/);
  });

  step("another participant's page link opened in the writer's browser does not swap its page", async () => {
    // The reader mints a fresh link (as `ce page` does) and plants it where
    // the writer clicks; the writer's browser keeps the writer's page.
    const minted = await api(reader, 'POST', '/session/page', {});
    assert.equal(minted.status, 200);
    const planted = await people.writer.context.newPage();
    const res = await planted.goto(`${ingressOrigin}${minted.body.path}${encodeURIComponent(minted.body.key)}`);
    assert.equal(res.status(), 403);
    assert.match(await planted.locator('body').textContent(), /another participant/);
    await planted.close();
    const back = await people.writer.context.newPage();
    await back.goto(`${ingressOrigin}/`);
    assert.match(await back.locator('#you').textContent(), /^Signed in as writer /);
    await back.close();
  });

  step('the one-time key cannot be used twice', async () => {
    const again = await people.writer.context.newPage();
    const res = await again.goto(writer.page_url);
    assert.equal(res.status(), 403);
    assert.match(await again.locator('body').textContent(), /already used/);
    await again.close();
  });

  step('the document is inert: no script ran, no raw HTML, no javascript: link', async () => {
    const { page } = people.writer;
    const doc = page.locator('#document');
    await eventually('the document text', async () => (await doc.textContent()).includes('Plain text'));
    assert.equal(await page.evaluate(() => window.__pwned), undefined, 'no script from the document ran');
    assert.equal(await doc.locator('script, img, iframe, [onerror], [onclick]').count(), 0);
    assert.equal(await page.locator('a[href^="javascript:" i]').count(), 0, 'no javascript: link anywhere');
    assert.ok(await doc.locator('.inert-link, a:not([href])').count() >= 1, 'the javascript: link is shown as its text only');
  });

  step('the writer leases a section, proposes a change, and sees it pending', async () => {
    const { page } = people.writer;
    const goals = await page.locator('#compose-section option').evaluateAll((os) => os.map((o) => o.value).find((v) => v.endsWith('Goals')));
    assert.ok(goals, 'the section list names Goals');
    await page.selectOption('#compose-section', goals);
    await page.click('#compose-lease');
    await page.locator(`#leases li[data-target="${goals}"]`).waitFor({ timeout: UI_TIMEOUT });
    assert.match(await page.locator(`#leases li[data-target="${goals}"]`).textContent(), /writer/);
    await page.click('#compose-load');
    await eventually('the section text', async () => (await page.inputValue('#compose-text')).includes('To be written'));
    await page.fill('#compose-text', '## Goals\n\nSee the sea. <script>window.__pwned = 4</script> [x](javascript:window.__pwned=5)\n\n');
    await page.fill('#compose-summary', 'goals: the sea');
    await page.click('#compose-propose');
    const card = page.locator('article.proposal[data-status="pending"]');
    await card.waitFor({ timeout: UI_TIMEOUT });
    proposalID = await card.getAttribute('data-proposal-id');
    assert.match(await card.locator('h3').textContent(), /goals: the sea/);
    assert.equal(await card.locator('button', { hasText: /Approve|Reject|Commit/ }).count(), 0, 'no review for a session without approve');
    // The diff is text: the proposed <script> is shown, never run.
    await eventually('the diff', async () => (await card.locator('.diff').textContent()).includes('<script>'));
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    await page.screenshot({ path: path.join(artifacts, 'participant-writer.png'), fullPage: true });
  });

  step('the approver approves it from its own page', async () => {
    const { page, res } = await open('approver', approver);
    assert.equal(res.status(), 200);
    await page.locator('#live[data-state="on"]').waitFor({ timeout: UI_TIMEOUT });
    assert.equal(await page.locator('#compose').count(), 0, 'no lease or propose without checkout/propose');
    const card = page.locator(`article[data-proposal-id="${proposalID}"]`);
    await card.waitFor({ timeout: UI_TIMEOUT });
    await card.locator('button', { hasText: /^Approve$/ }).click();
    await page.locator(`article[data-proposal-id="${proposalID}"][data-status="approved"]`).waitFor({ timeout: UI_TIMEOUT });
    const r = await api(approver, 'GET', `/workspace/proposal?proposal_id=${proposalID}`);
    assert.equal(r.body.status, 'approved');
    assert.equal(r.body.reviewed_by, approver.participant_id);
    await page.screenshot({ path: path.join(artifacts, 'participant-approver.png'), fullPage: true });
    // The writer's page follows (by re-reading: it has no observe).
    await people.writer.page.locator(`article[data-proposal-id="${proposalID}"][data-status="approved"]`).waitFor({ timeout: 15_000 });
  });

  step('handoffs between pages: the writer creates one, the helper accepts and asks, the writer answers, the helper completes, the approver approves the result', async () => {
    const w = people.writer.page;
    await w.click('#handoff-new summary');
    await w.fill('#handoff-summary', 'check the plan <script>window.__pwned = 7</script>');
    await w.selectOption('#handoff-assignee', helper.participant_id);
    await w.click('#handoff-create');
    const wcard = w.locator('article.handoff[data-status="open"]');
    await wcard.waitFor({ timeout: UI_TIMEOUT });
    const handoffID = await wcard.getAttribute('data-handoff-id');
    assert.match(await wcard.locator('h3').textContent(), /<script>/, 'the summary is shown as text');

    const { page: hp } = await open('helper', helper);
    const hcard = () => hp.locator(`article[data-handoff-id="${handoffID}"]`);
    await hcard().locator('button', { hasText: /^Accept$/ }).click();
    await hp.locator(`article[data-handoff-id="${handoffID}"][data-status="accepted"]`).waitFor({ timeout: UI_TIMEOUT });
    // The helper asks (as its agent would, over the session), the writer answers on its page.
    const ask = await api(helper, 'POST', '/workspace/handoff/request_input', { handoff_id: handoffID, requests: [{ key: 'when', message: 'by when?' }] });
    assert.equal(ask.status, 200, JSON.stringify(ask.body));
    const form = w.locator(`article[data-handoff-id="${handoffID}"] form.answer`);
    await form.waitFor({ timeout: 15_000 });
    await form.locator('textarea, input[type="text"]').first().fill('by Friday');
    await form.locator('button[type="submit"]').click();
    await eventually('the answer recorded', async () => {
      const h = (await api(helper, 'GET', `/workspace/handoff?handoff_id=${handoffID}`)).body;
      const i = (h.inputs || h.handoff?.inputs || []).find((x) => x.key === 'when');
      return i && i.status !== 'open';
    });
    await hcard().locator('form.answer').waitFor({ state: 'detached', timeout: UI_TIMEOUT }).catch(() => {});
    assert.equal(await hcard().locator('form.answer').count(), 0, 'the assignee gets no answer form');
    await hcard().locator('.complete textarea').fill('plan checked: fine');
    await hcard().locator('button', { hasText: /^Complete$/ }).click();
    await hp.locator(`article[data-handoff-id="${handoffID}"][data-status="result_ready"]`).waitFor({ timeout: UI_TIMEOUT });
    assert.equal(await hp.locator(`article[data-handoff-id="${handoffID}"] button`, { hasText: /^Approve$/ }).count(), 0, 'no approve without approve');

    const ap = people.approver.page;
    const acard = ap.locator(`article[data-handoff-id="${handoffID}"][data-status="result_ready"]`);
    await acard.waitFor({ timeout: UI_TIMEOUT });
    await acard.locator('button', { hasText: /^Approve$/ }).click();
    await ap.locator(`article[data-handoff-id="${handoffID}"][data-status="approved"]`).waitFor({ timeout: UI_TIMEOUT });
    const h = (await api(approver, 'GET', `/workspace/handoff?handoff_id=${handoffID}`)).body;
    assert.equal(h.status || h.handoff?.status, 'approved');
    assert.equal(await w.evaluate(() => window.__pwned), undefined);
  });

  step('a read-only participant sees no action it cannot take, and a hand-made one is refused with nothing changed', async () => {
    const { page, res } = await open('reader', reader);
    assert.equal(res.status(), 200);
    await page.locator(`article[data-proposal-id="${proposalID}"]`).waitFor({ timeout: UI_TIMEOUT });
    for (const sel of ['#compose', '#handoff-new', '#invite-create', '#compose-lease', '#compose-propose']) {
      assert.equal(await page.locator(sel).count(), 0, `${sel} is not on a read-only page`);
    }
    const buttons = (await page.locator('main button').allTextContents()).map((s) => s.trim());
    for (const b of buttons) {
      assert.ok(['Older version', 'Newer version', 'Current version'].includes(b), `read-only page offers “${b}”`);
    }
    const before = await api(writer, 'GET', '/workspace/leases');
    const handoffsBefore = (await api(approver, 'GET', '/workspace/handoffs')).body.handoffs.length;
    for (const [route, body] of [
      ['/workspace/checkout', { target: 'workspace' }],
      ['/workspace/proposal/review', { proposal_id: proposalID, approve: false }],
      ['/workspace/handoff', { summary: 'forged' }],
      ['/workspace/invite', {}],
    ]) {
      const r = await pageFetch(page, 'POST', route, body);
      assert.equal(r.status, 403, `${route}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error, 'permission_denied');
    }
    assert.deepEqual((await api(writer, 'GET', '/workspace/leases')).body, before.body, 'the leases did not change');
    assert.equal((await api(writer, 'GET', `/workspace/proposal?proposal_id=${proposalID}`)).body.status, 'approved');
    assert.equal((await api(approver, 'GET', '/workspace/handoffs')).body.handoffs.length, handoffsBefore, 'no handoff was created (the approver sees every one)');
  });

  step('the cookie is worth nothing on the owner listener (same host, another port)', async () => {
    const { context } = people.writer;
    const p = await context.newPage();
    let res = await p.goto(`${ownerOrigin}/`);
    assert.equal(res.status(), 401);
    assert.doesNotMatch(await p.content(), /Work on a section/);
    res = await p.goto(`${ownerOrigin}/workspace/room`);
    assert.equal(res.status(), 401);
    await p.close();
  });

  step('after the session ends the cookie fails at once', async () => {
    const { page } = people.writer;
    const left = await api(writer, 'POST', '/workspace/leave');
    assert.equal(left.status, 200);
    const r = await pageFetch(page, 'GET', '/workspace/room');
    assert.equal(r.status, 401);
    await eventually('the signed-out notice', async () => /no longer signed in/.test(await page.locator('#notice').textContent()), 15_000);
    const res = await page.reload();
    assert.equal(res.status(), 401);
    assert.match(await page.locator('body').textContent(), /not signed in/);
  });

  step('no page logged a script error', async () => {
    const real = consoleProblems.filter((m) => !/status of 40[13]/.test(m));
    assert.deepEqual(real, []);
  });
});
