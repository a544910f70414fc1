// What the browser end-to-end tests share (owner-page, participant-page and
// mcp-app): Debian's chromium driven by playwright-core (no browser is ever
// downloaded), the ordered `step` that skips once an earlier one failed and
// leaves a screenshot of the failure, polling, and the capture of what a
// page reports as a problem (console errors, uncaught exceptions), so each
// test holds only its own story.

import { it } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const e2eDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** Where screenshots go: $CE_E2E_ARTIFACTS, or e2e/artifacts. */
export const artifacts = process.env.CE_E2E_ARTIFACTS || path.join(e2eDir, 'artifacts');

/** The browser: $CE_E2E_CHROMIUM, or Debian's /usr/bin/chromium. */
export const browserPath = process.env.CE_E2E_CHROMIUM || '/usr/bin/chromium';

/** Chromium's flags: headless, no sandbox (containers), nothing phoning home. */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** How long a test waits for the page to show something. */
export const UI_TIMEOUT = 10_000;

/**
 * envJSON reads the JSON file named by environment variable `name`; unset
 * means the test was not started by its script, which the error names.
 */
export function envJSON(name, script) {
  const p = process.env[name];
  if (!p) throw new Error(`${name} is not set: run this through ${script}`);
  return JSON.parse(fs.readFileSync(p, 'utf8'));
}

/**
 * orderedSteps returns `step(name, fn)`: one node:test `it` of a story whose
 * steps share state, so once one fails the rest are skipped rather than
 * failing for the wrong reason. On a failure, `screenshots()` lists the
 * [page, file name] pairs to save in artifacts (best effort).
 */
export function orderedSteps(screenshots) {
  let failed = false;
  return function step(name, fn) {
    it(name, async (t) => {
      if (failed) {
        t.skip('an earlier step failed');
        return;
      }
      try {
        await fn(t);
      } catch (e) {
        failed = true;
        for (const [page, file] of screenshots()) {
          if (page) await page.screenshot({ path: path.join(artifacts, file), fullPage: true }).catch(() => {});
        }
        throw e;
      }
    });
  };
}

/** eventually polls fn until it returns a truthy value, or times out naming `what`. */
export async function eventually(what, fn, timeout = UI_TIMEOUT) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * captureProblems appends to `sink` what the page reports as wrong: console
 * messages of the given types (a CSP violation is a console error) as
 * "TYPE: text", uncaught exceptions as "pageerror: message", each after
 * `label` (say "writer: ") when several pages share one sink.
 */
export function captureProblems(page, sink, { types = ['error'], label = '' } = {}) {
  page.on('console', (m) => { if (types.includes(m.type())) sink.push(`${label}${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => sink.push(`${label}pageerror: ${e.message}`));
}

/** launch starts a headless chromium for tests that open contexts of their own. */
export async function launch() {
  fs.mkdirSync(artifacts, { recursive: true });
  return chromium.launch({ executablePath: browserPath, headless: true, args: CHROMIUM_ARGS });
}

/**
 * launchPersistent starts a headless chromium on a fresh profile directory
 * (named after `prefix`) and returns its context, first page and a close()
 * that also removes the profile.
 */
export async function launchPersistent(prefix, options = {}) {
  fs.mkdirSync(artifacts, { recursive: true });
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: browserPath, headless: true, args: CHROMIUM_ARGS, ...options,
    });
  } catch (e) {
    fs.rmSync(userDataDir, { recursive: true, force: true });
    throw e;
  }
  const page = context.pages()[0] || await context.newPage();
  const close = async () => {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  };
  return { context, page, close };
}
