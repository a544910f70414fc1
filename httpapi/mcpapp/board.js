// The board's view: an MCP App (io.modelcontextprotocol/ui, ext-apps 2.0.4)
// talking to its host only through postMessage JSON-RPC: ui/initialize,
// then ui/notifications/initialized, then tools/call of the app-only
// workspace_board (and of handoff_approve, handoff_reject, workspace_review
// for the buttons), which the host proxies to the server with the
// session's own bearer. It fetches nothing and links nowhere. Every text
// from the room is set with textContent: markup in it is shown, never run.
(() => {
  'use strict';
  const APP_PROTOCOL = '2026-01-26';
  const host = window.parent;
  const pending = new Map();
  let nextID = 1;
  let me = { participant_id: '', capabilities: [] };
  let loading = null;
  let renders = 0;

  const $ = (id) => document.getElementById(id);

  function post(msg) { host.postMessage(msg, '*'); }

  function request(method, params) {
    const id = nextID++;
    post({ jsonrpc: '2.0', id, method, params });
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  }

  function notify(method, params) { post({ jsonrpc: '2.0', method, params: params || {} }); }

  window.addEventListener('message', (ev) => {
    // Only the host speaks to the view: a message from any other window
    // (a sibling frame, a popup, the view itself) is dropped unread.
    if (ev.source !== host || host === window) return;
    const m = ev.data;
    if (!m || typeof m !== 'object' || m.jsonrpc !== '2.0') return;
    if (typeof m.method !== 'string') {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(new Error(String(m.error.message || 'error')));
      else p.resolve(m.result);
      return;
    }
    if (m.id !== undefined && m.id !== null) {
      if (m.method === 'ui/resource-teardown' || m.method === 'ping') post({ jsonrpc: '2.0', id: m.id, result: {} });
      else post({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } });
      return;
    }
    // A linked tool (handoff_list, workspace_proposals) answered the
    // model: the room moved, read the board again.
    if (m.method === 'ui/notifications/tool-result') refresh();
    if (m.method === 'ui/notifications/host-context-changed') applyContext(m.params);
  });

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function say(text, isError) {
    const s = $('status');
    s.textContent = text;
    s.className = isError ? 'error' : '';
  }

  function can(cap) {
    const caps = me.capabilities || [];
    return caps.includes(cap) || caps.includes('admin') || caps.includes('*');
  }

  // call runs a tool through the host; a tool error becomes an exception
  // carrying the room's message.
  async function call(name, args) {
    const res = await request('tools/call', { name, arguments: args || {} });
    if (!res || res.isError) {
      const sc = (res && res.structuredContent) || {};
      throw new Error(String(sc.message || sc.error || 'the room refused'));
    }
    return res.structuredContent || {};
  }

  function button(label, action, run) {
    const b = el('button', '', label);
    b.type = 'button';
    b.dataset.action = action;
    b.addEventListener('click', async () => {
      for (const x of document.querySelectorAll('button')) x.disabled = true;
      let problem = null;
      try {
        await run();
      } catch (e) {
        problem = e;
      }
      await refresh();
      if (problem) say(label + ' failed: ' + problem.message, true);
      else say(label + ': done.');
    });
    return b;
  }

  function handoffCard(h, decide) {
    const a = el('article');
    a.dataset.handoffId = String(h.handoff_id);
    a.appendChild(el('h3', '', h.summary));
    const who = 'from ' + h.owner_id + (h.assignee_id ? ', with ' + h.assignee_id : '') +
      (h.requested_assignee_id && !h.assignee_id ? ', addressed to ' + h.requested_assignee_id : '');
    a.appendChild(el('p', 'meta', h.status + ' · ' + who));
    if (h.constraints) a.appendChild(el('p', 'text', h.constraints));
    if (h.result) {
      a.appendChild(el('p', 'meta', h.result.is_error ? 'Result (could not be done):' : 'Result:'));
      a.appendChild(el('p', 'text result', h.result.text));
    }
    if (h.decision_note) a.appendChild(el('p', 'meta', 'Note: ' + h.decision_note));
    if (decide) {
      const row = el('div', 'actions');
      row.appendChild(button('Approve', 'approve', () => call('handoff_approve', { handoff_id: h.handoff_id })));
      row.appendChild(button('Reject', 'reject', () => call('handoff_reject', { handoff_id: h.handoff_id })));
      a.appendChild(row);
    }
    return a;
  }

  function diffBlock(text) {
    const pre = el('pre', 'diff');
    for (const line of String(text || '').split('\n')) {
      const c = line.startsWith('+') && !line.startsWith('+++') ? 'add'
        : line.startsWith('-') && !line.startsWith('---') ? 'del' : '';
      pre.appendChild(el('span', c, line));
    }
    return pre;
  }

  function proposalCard(p) {
    const a = el('article');
    a.dataset.proposalId = String(p.proposal_id);
    a.appendChild(el('h3', '', p.summary || '(no summary)'));
    const where = p.scope === 'document' ? 'the whole document' : 'section ' + ((p.change && p.change.section) || '');
    a.appendChild(el('p', 'meta', 'by ' + p.participant_id + ' · ' + where + ' · base v' + p.base_version));
    const d = p.diff || {};
    if (d.stale) a.appendChild(el('p', 'meta', 'The document moved since: committing it will conflict.'));
    a.appendChild(el('p', 'meta', '+' + (d.added || 0) + ' −' + (d.removed || 0) + (d.diff_truncated ? ' (diff cut)' : '')));
    a.appendChild(diffBlock(d.diff));
    if (can('approve') && p.participant_id !== me.participant_id) {
      const row = el('div', 'actions');
      row.appendChild(button('Approve', 'approve', () => call('workspace_review', { proposal_id: p.proposal_id, approve: true })));
      row.appendChild(button('Reject', 'reject', () => call('workspace_review', { proposal_id: p.proposal_id, approve: false })));
      a.appendChild(row);
    }
    return a;
  }

  function fill(box, nodes, emptyText) {
    box.replaceChildren(...nodes);
    if (!nodes.length) box.appendChild(el('p', 'empty', emptyText));
  }

  function render(b) {
    me = b.me || me;
    $('who').textContent = 'You are ' + me.participant_id + ' (' + (me.capabilities || []).join(', ') + ').';
    const handoffs = Array.isArray(b.handoffs) ? b.handoffs : [];
    const waiting = [];
    for (const h of handoffs) {
      if (h.status === 'result_ready' && can('approve') && h.assignee_id !== me.participant_id) {
        waiting.push(handoffCard(h, true));
      } else if (h.status === 'open' && h.requested_assignee_id === me.participant_id) {
        const c = handoffCard(h, false);
        c.appendChild(el('p', 'meta', 'Addressed to you: accept it with handoff_accept.'));
        waiting.push(c);
      } else if (h.status === 'accepted' && h.assignee_id === me.participant_id) {
        const c = handoffCard(h, false);
        c.appendChild(el('p', 'meta', 'Yours to do: deliver it with handoff_complete.'));
        waiting.push(c);
      } else if (h.owner_id === me.participant_id && h.task_status === 'input_required') {
        const c = handoffCard(h, false);
        c.appendChild(el('p', 'meta', 'A question for you: answer it with handoff_answer.'));
        waiting.push(c);
      }
    }
    fill($('waiting'), waiting, 'Nothing waits for you.');
    fill($('proposals'), (Array.isArray(b.proposals) ? b.proposals : []).map(proposalCard), 'No pending proposal.');
    fill($('handoffs'), handoffs.map((h) => handoffCard(h, false)), 'No handoff you may see.');
    document.body.dataset.renders = String(++renders);
    sizeChanged();
  }

  async function refresh() {
    if (loading) return loading;
    loading = (async () => {
      try {
        render(await call('workspace_board', {}));
        if ($('status').className !== 'error') say('Up to date.');
      } catch (e) {
        say('Could not read the board: ' + e.message, true);
      } finally {
        loading = null;
        for (const x of document.querySelectorAll('button')) x.disabled = false;
      }
    })();
    return loading;
  }

  // applyContext takes the host's theme and its standard CSS variables
  // (values set through the CSSOM, never parsed as markup or script).
  function applyContext(ctx) {
    if (!ctx || typeof ctx !== 'object') return;
    const root = document.documentElement;
    if (ctx.theme === 'light' || ctx.theme === 'dark') root.style.colorScheme = ctx.theme;
    const vars = ctx.styles && ctx.styles.variables;
    if (vars && typeof vars === 'object') {
      for (const [k, v] of Object.entries(vars)) {
        if (/^--[a-z0-9-]+$/.test(k) && typeof v === 'string') root.style.setProperty(k, v);
      }
    }
  }

  let lastSize = '';
  function sizeChanged() {
    const r = document.documentElement.getBoundingClientRect();
    const size = { width: Math.ceil(r.width), height: Math.ceil(r.height) };
    if (JSON.stringify(size) === lastSize) return;
    lastSize = JSON.stringify(size);
    notify('ui/notifications/size-changed', size);
  }

  (async () => {
    if (host === window) { say('Open this board inside an MCP Apps host.', true); return; }
    try {
      const init = await request('ui/initialize', {
        appInfo: { name: 'commonroom-board', version: '1' },
        appCapabilities: { availableDisplayModes: ['inline'] },
        protocolVersion: APP_PROTOCOL,
      });
      applyContext(init && init.hostContext);
      notify('ui/notifications/initialized');
      if (typeof ResizeObserver === 'function') new ResizeObserver(sizeChanged).observe(document.documentElement);
    } catch (e) {
      say('The host refused the view: ' + e.message, true);
      return;
    }
    await refresh();
  })();
})();
