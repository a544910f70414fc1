// The room page's script, for the owner page and a participant's page alike
// (issue 28): it renders from the viewer's capabilities (the body's
// data-caps, spelled out by the server) and offers only the actions the
// viewer may take; the server refuses the rest anyway. No framework and no
// build step: it reads the room
// (GET /workspace/room), follows its changes (GET /workspace/observe, a
// server-sent stream; each change re-reads the room, coalesced), renders only
// the parts whose data changed, and acts through the /workspace routes.
// Requests carry the page's cookie only because they are same-origin; writes
// are JSON, so the server's Origin check (D23) applies to every one of them.
// Everything the room says is inserted as text, never as markup.
'use strict';

(() => {
  const COALESCE_MS = 100;       // events closer together than this cause one re-read
  const RESULT_PREVIEW = 600;    // characters of a result shown before "Show all"
  const MAX_RETRY_MS = 30000;
  const POLL_MS = 5000;          // how often a page without observe re-reads the room

  const $ = (id) => document.getElementById(id);

  // Who views the page: the operator (owner page) or one participant's
  // session (a participant's page), and what it may do.
  const viewerCaps = new Set((document.body.dataset.caps || '').split(' ').filter(Boolean));
  const may = (c) => viewerCaps.has(c);
  const isOperator = document.body.dataset.operator === 'true';
  const me = document.body.dataset.participantId || '';

  // ---- DOM helpers -------------------------------------------------------

  // el('p', {class: 'x', text: 'y', 'aria-label': 'z', onclick: fn}, child, …)
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') node.textContent = String(v);
      else if (k === 'class') node.className = v;
      else if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(node.dataset, v);
      else if (v === true) node.setAttribute(k, '');
      else node.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  let uid = 0;
  const newID = (prefix) => `${prefix}-${++uid}`;

  function when(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const today = new Date().toDateString() === d.toDateString();
    const opts = today ? { hour: '2-digit', minute: '2-digit', second: '2-digit' }
      : { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' };
    return el('time', { datetime: iso, title: iso, text: d.toLocaleString(undefined, opts) });
  }

  // ---- the notice line and the live line ---------------------------------

  let noticeFrom = '';
  function setNotice(msg, from) {
    const n = $('notice');
    if (!msg) {
      if (!from || from === noticeFrom) { n.textContent = ''; noticeFrom = ''; }
      return;
    }
    n.textContent = msg;
    noticeFrom = from || 'action';
  }

  function setLive(state, text) {
    const l = $('live');
    if (l.dataset.state === state && l.textContent === text) return;
    l.dataset.state = state;
    l.textContent = text;
  }

  // ---- requests -----------------------------------------------------------

  async function api(method, url, body) {
    const opts = { method, credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(url, opts);
    } catch (e) {
      const err = new Error('the room did not answer; is `ce serve` still running?');
      err.status = 0;
      throw err;
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!res.ok) {
      const err = new Error((data && data.message) || `HTTP ${res.status}`);
      err.status = res.status;
      err.code = data && data.error;
      err.data = data;
      throw err;
    }
    return data;
  }

  const SIGNED_OUT = isOperator
    ? 'This page is no longer signed in (the room restarted or the link expired). Run `ce open FILE` for a fresh link.'
    : 'This page is no longer signed in (your session ended, or the room restarted). Run `ce page` for a fresh link, or join again.';

  // act runs one user action: the button is disabled meanwhile, a refusal
  // goes to the notice line, success clears it and re-reads the room.
  async function act(button, what, fn) {
    if (button) button.disabled = true;
    try {
      await fn();
      setNotice('', 'action');
      schedule(0);
      return true;
    } catch (e) {
      setNotice(e.status === 401 ? SIGNED_OUT : `Could not ${what}: ${e.message}`, 'action');
      if (e.status !== 401) schedule(0); // the view was probably out of date
      return false;
    } finally {
      if (button && button.isConnected) button.disabled = false;
    }
  }

  // ---- reading the room, coalesced ---------------------------------------

  let timer = null;
  let inflight = false;
  let dirty = false;
  let lastEventID = 0;
  let signedOut = false;

  function schedule(delay) {
    dirty = true;
    if (timer === null && !inflight) timer = setTimeout(refresh, delay === undefined ? COALESCE_MS : delay);
  }

  async function refresh() {
    timer = null;
    dirty = false;
    inflight = true;
    try {
      const v = await api('GET', '/workspace/room');
      render(v);
      setNotice('', 'refresh');
    } catch (e) {
      if (e.status === 401) {
        signedOut = true;
        if (stream) stream.close();
        setLive('off', 'Live updates: off (signed out)');
        setNotice(SIGNED_OUT, 'refresh');
      } else {
        setNotice(`Could not read the room: ${e.message}`, 'refresh');
      }
    } finally {
      inflight = false;
      if (dirty && !signedOut) timer = setTimeout(refresh, COALESCE_MS);
    }
  }

  // ---- the event stream ----------------------------------------------------

  let stream = null;
  let retryMS = 1000;

  function connect() {
    if (signedOut) return;
    const es = new EventSource('/workspace/observe');
    stream = es;
    es.onopen = () => {
      retryMS = 1000;
      setLive('on', 'Live updates: on');
      schedule(0); // whatever happened while we were away
    };
    es.onmessage = (m) => {
      let frame;
      try { frame = JSON.parse(m.data); } catch { return; }
      const ev = frame && frame.params;
      if (!ev || typeof ev.event_id !== 'number') return;
      if (ev.event_id <= lastEventID) return; // already reflected (the stream may repeat one)
      lastEventID = ev.event_id;
      schedule();
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused (e.g. 401 or 503): the browser will not retry by itself.
        es.close();
        const secs = Math.round(retryMS / 1000);
        setLive('off', `Live updates: off, retrying in ${secs} s`);
        setTimeout(connect, retryMS);
        retryMS = Math.min(retryMS * 2, MAX_RETRY_MS);
        schedule(0); // tells a signed-out page apart from a stopped room
      } else {
        setLive('reconnecting', 'Live updates: reconnecting…');
      }
    };
  }

  // ---- rendering ---------------------------------------------------------

  const last = {};      // section -> the JSON it was last rendered from
  let names = {};       // participant_id -> name
  let currentVersion = 0;
  let roomName = document.title.replace(/ · Commonroom$/, '');
  let handoffsByID = new Map();
  let proposalsByID = new Map();
  let leasesNow = [];
  const mayCommit = document.body.dataset.mayCommit === 'true';

  // ---- what waits on you ------------------------------------------------
  //
  // The count in the header and the tab title is the room's own answer
  // (room view "waiting", the query `ce inbox` prints). A desktop
  // notification is sent only after the host asked for them with the
  // button (the browser asks for permission on that click, never on load),
  // and only for an item that was not waiting at the previous read.

  let seenWaiting = null; // ids waiting at the last read (null: not read yet)
  let notified = 0;

  const waitingKey = (it) => `${it.kind}:${it.id}:${it.kind === 'question' ? it.questions : ''}`;
  const cardOf = (it) => (it.kind === 'proposal' ? `proposal-${it.id}` : `handoff-${it.id}`);

  function waitingWords(it) {
    const from = it.from_name || who(it.from_id) || 'someone';
    if (it.kind === 'result') return `${from} finished “${it.summary}” — waiting for your approval`;
    if (it.kind === 'question') return `${from} asks ${it.questions === 1 ? 'a question' : `${it.questions} questions`} about “${it.summary}” — waiting for your answer`;
    return `${from} proposes ${it.scope === 'document' ? 'replacing the whole document' : 'a change'}: “${it.summary}” — waiting for your review`;
  }

  function renderWaiting(w) {
    const n = w.count || 0;
    const parts = [];
    if (w.results) parts.push(`${w.results} result${w.results === 1 ? '' : 's'} to approve`);
    if (w.proposals) parts.push(`${w.proposals} proposal${w.proposals === 1 ? '' : 's'} to review`);
    if (w.questions) parts.push(`${w.questions} handoff${w.questions === 1 ? '' : 's'} with questions`);
    const line = $('waiting');
    line.dataset.count = String(n);
    if (!n) {
      line.replaceChildren('Nothing waits for you');
    } else {
      const first = (w.items || [])[0];
      line.replaceChildren(el('span', { class: 'strong', text: `${n} waiting for you` }), `: ${parts.join(', ')}`,
        ...(first ? [' · oldest: ', el('a', { href: `#${cardOf(first)}`, class: 'card-link', text: waitingWords(first) })] : []));
    }
    document.title = `${n ? `(${n}) ` : ''}${roomName} · Commonroom`;
    const now = new Set((w.items || []).map(waitingKey));
    if (seenWaiting !== null && notifyOn()) {
      for (const it of w.items || []) if (!seenWaiting.has(waitingKey(it))) notify(it);
    }
    seenWaiting = now;
  }

  const notifyOn = () => typeof Notification === 'function' && Notification.permission === 'granted' && localStorage.getItem('ce-notify') === 'on';

  function notify(it) {
    try {
      const n = new Notification(`${roomName}: something waits for you`, { body: waitingWords(it), tag: waitingKey(it) });
      n.onclick = () => { window.focus(); const c = $(cardOf(it)); if (c) { c.scrollIntoView(); c.focus(); } n.close(); };
      notified += 1;
      document.body.dataset.notified = String(notified);
    } catch { /* a browser may refuse notifications from a page; the count in the title remains */ }
  }

  function setupNotify() {
    const b = $('notify-enable');
    if (typeof Notification !== 'function') return;
    const show = () => {
      const on = notifyOn();
      b.hidden = false;
      b.textContent = on ? 'Stop desktop notifications' : 'Notify me when something waits';
      b.setAttribute('aria-pressed', on ? 'true' : 'false');
    };
    show();
    b.addEventListener('click', async () => {
      if (notifyOn()) {
        localStorage.setItem('ce-notify', 'off');
        show();
        return;
      }
      let perm = Notification.permission;
      if (perm === 'default') perm = await Notification.requestPermission();
      if (perm === 'granted') localStorage.setItem('ce-notify', 'on');
      else setNotice('The browser did not allow notifications; the count stays in the tab title.', 'action');
      show();
    });
  }

  function changed(section, data) {
    const sig = JSON.stringify(data);
    if (last[section] === sig) return false;
    last[section] = sig;
    return true;
  }

  const who = (id) => (id ? (names[id] || id) : '');

  function render(v) {
    names = {};
    for (const p of v.participants || []) names[p.participant_id] = p.name;
    for (const p of (v.diagnostics && v.diagnostics.participants) || []) names[p.participant_id] ||= p.name;
    for (const ev of v.events || []) if (ev.event_id > lastEventID) lastEventID = ev.event_id;
    const namesSig = JSON.stringify(names);
    const st = v.status || {};

    currentVersion = st.version || 0;
    roomName = st.name || roomName;
    handoffsByID = new Map((v.handoffs || []).map((h) => [h.handoff_id, h]));
    proposalsByID = new Map((v.proposals || []).map((p) => [p.proposal_id, p]));
    if (changed('waiting', [v.waiting, namesSig, st.name])) renderWaiting(v.waiting || { count: 0, items: [] });
    if (changed('header', [st.version, st.lifecycle, st.participants, st.pending_proposals])) {
      $('version').textContent = `Version ${st.version}`;
      $('lifecycle').textContent = st.lifecycle || '';
      const np = st.participants, pp = st.pending_proposals;
      $('counts').textContent = `${np} participant${np === 1 ? '' : 's'} · ${pp} pending proposal${pp === 1 ? '' : 's'}`;
    }
    if (v.sidecar && changed('size', v.sidecar.bytes)) renderSize(v.sidecar.bytes);
    if (changed('connection', v.diagnostics && v.diagnostics.listener)) renderConnection(v.diagnostics.listener);
    shares = v.task_shares || null;
    if (changed('participants', [v.participants, shares])) renderParticipants(v.participants || []);
    if (changed('leases', [v.leases, namesSig])) renderLeases(v.leases || []);
    renderKeyed($('proposals'), v.proposals || [], (p) => p.proposal_id, renderProposal, `${namesSig}|${currentVersion}`, 'No proposals yet.');
    renderKeyed($('handoffs'), sortHandoffs(v.handoffs || []), (h) => h.handoff_id, renderHandoff, namesSig, 'No handoffs yet.');
    if (changed('outline', st.heading_tree)) renderOutline(st.heading_tree || []);
    if (changed('events', [v.events, namesSig, v.handoffs, v.proposals])) renderEvents(v.events || []);
    if ($('invites') && changed('invites', v.invites)) renderInvites(v.invites);
    if (changed('compose', [st.heading_tree, v.participants])) renderComposeChoices(st.heading_tree || [], v.participants || []);
    leasesNow = v.leases || [];
    if (changed('document', currentVersion) && docShown === 0) loadDocument(0);
    if (changed('marks', [leasesNow, v.proposals, namesSig])) markSections();
  }

  // The room's size on disk (the sidecar and its write-ahead log), in the
  // header; written as the server renders it (byteSize in page.go).
  function byteSize(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
    if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
    return `${(n / (1 << 30)).toFixed(1)} GiB`;
  }

  function renderSize(bytes) {
    let size = $('size');
    if (!size) {
      size = el('span', { id: 'size', title: 'the sidecar: database and write-ahead log' });
      $('counts').after(' · ', size);
    }
    size.textContent = `${byteSize(bytes)} on disk`;
  }

  function renderConnection(l) {
    if (!l) return;
    // Loopback as it always read; any other transport by its own line
    // (e.g. "NAME (private, encrypted) host:port").
    $('connection').textContent = l.type !== 'loopback' && l.describe ? l.describe
      : [l.type, l.mode, l.encrypted ? 'encrypted' : 'not encrypted'].filter(Boolean).join(' · ');
  }

  function participantLine(p) {
    return `${p.kind}: ${p.name}${p.is_host ? ' (host)' : ''}${p.transport ? ` · ${p.transport}` : ''}`;
  }

  function renderParticipants(ps) {
    shownParticipants = ps;
    $('participants').replaceChildren(...(ps.length ? ps.map(participantItem)
      : [el('li', { class: 'empty', text: 'Nobody yet.' })]));
  }

  // ---- a participant's row ------------------------------------------------
  //
  // Who it is; its active tasks (each participant's handoffs may hold only a
  // share of the room's); for anyone but the host, a button that ends its
  // sessions once the host confirms; and, while it holds active tasks, a
  // button that cancels all of its open handoffs at once (after a
  // confirmation), e.g. when an agent floods the room.

  let shares = null;            // GET /workspace/room's task_shares (admins only)
  let shownParticipants = [];
  let confirmingClear = '';     // the participant whose clear awaits confirmation

  function participantItem(p) {
    const li = el('li', { class: 'participant', dataset: { participantId: p.participant_id } },
      el('span', { class: 'who', text: participantLine(p) }));
    const n = (shares && shares.by_participant && shares.by_participant[p.participant_id]) || 0;
    if (n) li.append(el('span', { class: 'muted', text: ` · ${n} active task${n === 1 ? '' : 's'}${p.is_host ? '' : ` of ${shares.share}`}` }));
    // The row's actions are one labelled group, apart from who it is.
    const group = el('div', { class: 'actions row-actions', role: 'group', 'aria-label': `Actions for ${p.name}` });
    if (!p.is_host && may('invite')) group.append(readmitButton(p));
    if (!p.is_host && may('admin')) group.append(endSessionsButton(p));
    if (n && may('admin')) group.append(clearControls(p, n));
    if (group.childElementCount) li.append(group);
    return li;
  }

  function clearControls(p, n) {
    const what = `${n} open handoff${n === 1 ? '' : 's'} of ${p.name}`;
    if (confirmingClear !== p.participant_id) {
      return el('div', { class: 'actions' }, el('button', { type: 'button', class: 'danger', text: 'Cancel open handoffs…',
        'aria-label': `Cancel all open handoffs of ${p.name}`,
        onclick: () => { confirmingClear = p.participant_id; rerenderParticipants(`clear-yes-${p.participant_id}`); } }));
    }
    const yes = el('button', { type: 'button', class: 'danger', id: `clear-yes-${p.participant_id}`, text: `Yes, cancel ${what}`,
      onclick: (e) => clearHandoffs(e.currentTarget, p) });
    const no = el('button', { type: 'button', class: 'secondary', text: 'Keep them',
      onclick: () => { confirmingClear = ''; rerenderParticipants(); } });
    return el('div', { class: 'actions confirm', role: 'group', 'aria-label': `Confirm cancelling ${what}` },
      el('span', { text: `Cancel ${what}? Their tasks end as cancelled; work already done is not undone.` }), yes, no);
  }

  // A re-admission invitation brings this participant back as itself (a
  // new session for the same participant: its tasks, handoffs and
  // idempotency keys stay its own), e.g. after its session ran out.
  function readmitButton(p) {
    return el('button', { type: 'button', class: 'secondary', 'aria-label': `Re-admit ${p.name}`, text: 'Re-admit…',
      onclick: (e) => act(e.currentTarget, `make a re-admission invitation for ${p.name}`, async () => {
        const g = await api('POST', '/workspace/invite', { participant_id: p.participant_id });
        showInvite(g, `Brings ${p.name} back as itself (a new session, the same participant); works once, until ${new Date(g.expires_at).toLocaleString()}. Copy it now: it is not shown again.`);
      }) });
  }

  function endSessionsButton(p) {
    const n = (p.sessions || []).length;
    const what = n === 1 ? 'its session ends' : `its ${n} sessions end`;
    return el('button', { type: 'button', class: 'danger', 'aria-label': `End the sessions of ${p.name}`, text: 'End sessions',
      onclick: (e) => {
        const button = e.currentTarget;
        if (!window.confirm(`End ${p.name}: ${what} now, it leaves the room and its leases are released. It needs a new invitation to come back.`)) return;
        act(button, `end the sessions of ${p.name}`, () => api('POST', '/workspace/session/end', { participant_id: p.participant_id }));
      } });
  }

  function rerenderParticipants(focusID) {
    renderParticipants(shownParticipants);
    if (focusID && $(focusID)) $(focusID).focus();
  }

  async function clearHandoffs(button, p) {
    let res;
    const ok = await act(button, `cancel the handoffs of ${p.name}`, async () => {
      res = await api('POST', '/workspace/participant/cancel_handoffs', { participant_id: p.participant_id });
    });
    confirmingClear = '';
    rerenderParticipants();
    if (ok) setNotice(`Cancelled ${res.cancelled} handoff${res.cancelled === 1 ? '' : 's'} of ${p.name}.`, 'action');
  }

  function renderLeases(ls) {
    $('leases').replaceChildren(...(ls.length
      ? ls.map((l) => el('li', { dataset: { leaseId: l.lease_id, target: l.target } }, el('span', { class: 'strong', text: l.target }), ` · ${who(l.participant_id)} · until `, when(l.expires_at),
        l.participant_id === me && may('checkout') ? [' ', el('button', { type: 'button', class: 'secondary small-button', 'aria-label': `Release the lease on ${l.target}`, text: 'Release',
          onclick: (e) => act(e.currentTarget, `release the lease on ${l.target}`, () => api('POST', '/workspace/release', { lease_id: l.lease_id })) })] : null))
      : [el('li', { class: 'empty', text: 'No leases.' })]));
  }

  function renderOutline(tree) {
    $('outline').replaceChildren(...(tree.length
      ? tree.map((r) => el('li', { class: `lvl-${Math.min(Math.max((r.level || 1) - 1, 0), 5)}`, title: r.path, text: r.title }))
      : [el('li', { class: 'empty', text: 'The document has no headings.' })]));
  }

  function renderEvents(evs) {
    $('events').replaceChildren(...(evs.length ? evs.map((ev) => {
      const line = activityLine(ev);
      return el('li', { dataset: { eventType: ev.event_type } }, line, ' · ', when(ev.created_at));
    }) : [el('li', { class: 'empty', text: 'No activity yet.' })]));
  }

  // ---- activity in words -------------------------------------------------
  //
  // Each event as a sentence naming who did what to which item, the item's
  // name linked to its card ("writer finished About Venue — waiting for
  // your approval"). Events carry ids only; names and summaries come from
  // the room view (an item no longer in it is named by its kind).

  function cardLink(kind, id, fallback) {
    const item = kind === 'handoff' ? handoffsByID.get(id) : proposalsByID.get(id);
    const text = item ? (item.summary || fallback) : fallback;
    if (!item) return el('span', { class: 'strong', text });
    return el('a', { href: `#${kind}-${id}`, class: 'strong item-link', text, dataset: { card: `${kind}-${id}` } });
  }

  function activityLine(ev) {
    const p = ev.payload || {};
    const actor = who(p.actor_id || p.reviewer_id || p.reviewed_by || p.participant_id) || 'the room';
    const h = () => cardLink('handoff', p.handoff_id, 'a handoff');
    const pr = () => cardLink('proposal', p.proposal_id, 'a proposal');
    const owner = () => { const x = handoffsByID.get(p.handoff_id); return x ? who(x.owner_id) : 'its owner'; };
    switch (ev.event_type) {
      case 'handoff.created': return el('span', {}, `${actor} asked for `, h());
      case 'handoff.accepted': return el('span', {}, `${actor} took on `, h());
      case 'handoff.input_requested': return el('span', {}, `${actor} asks ${owner()} about `, h(), ' — waiting for an answer');
      case 'handoff.input_received': return el('span', {}, `${actor} answered the questions on `, h());
      case 'handoff.result_ready': return el('span', {}, `${actor} finished `, h(), may('approve') ? ' — waiting for your approval' : ' — waiting for approval');
      case 'handoff.approved': return el('span', {}, `${actor} approved the result of `, h());
      case 'handoff.rejected': return el('span', {}, `${actor} rejected the result of `, h());
      case 'handoff.cancelled': return el('span', {}, `${p.actor_id ? actor : 'The room'} cancelled `, h());
      case 'task.failed': return el('span', {}, 'The work on ', h(), ' failed');
      case 'proposal.created': return el('span', {}, `${actor} proposed `, pr(), may('approve') ? ' — waiting for your review' : ' — waiting for review');
      case 'proposal.approved': return el('span', {}, `${actor} approved `, pr());
      case 'proposal.rejected': return el('span', {}, `${actor} rejected `, pr());
      case 'proposal.committed': {
        const x = proposalsByID.get(p.proposal_id);
        return el('span', {}, pr(), ` was committed as version ${p.version}${x && x.committed_by ? ` by ${who(x.committed_by)}` : ''}`);
      }
      case 'proposal.conflicted': return el('span', {}, pr(), ` could not be committed: the document moved from v${p.base_version} to v${p.current_version}`);
      case 'proposal.superseded': return el('span', {}, pr(), ` was superseded by version ${p.by_version}`);
      case 'change.committed': return el('span', {}, `Version ${p.version}: ${p.summary || 'a change'}${p.participant_id ? ` by ${who(p.participant_id)}` : ''}`);
      case 'lease.acquired': return el('span', {}, `${actor} is working on `, el('span', { class: 'strong', text: p.target || 'a section' }));
      case 'lease.released': case 'lease.expired': return el('span', {}, `${actor} stopped working on `, el('span', { class: 'strong', text: p.target || 'a section' }));
      case 'participant.joined': return el('span', {}, `${who(p.participant_id) || p.name || 'Someone'} joined`);
      case 'participant.left': return el('span', {}, `${who(p.participant_id) || 'Someone'} left`);
      case 'invite.created': return el('span', {}, `${actor} made an invitation${p.label ? ` “${p.label}”` : ''}`);
      case 'invite.revoked': return el('span', {}, `${actor} revoked an invitation`);
      default: {
        // Anything else in plain words: "task completed", "session ended".
        const words = ev.event_type.replace(/[._]/g, ' ');
        return el('span', {}, `${words[0].toUpperCase()}${words.slice(1)}${p.handoff_id ? ' · ' : ''}`, p.handoff_id ? h() : '');
      }
    }
  }

  // Following a link to a card scrolls it into view and moves the focus
  // there, so keyboard and screen-reader users land on it too.
  document.addEventListener('click', (e) => {
    const a = e.target.closest && e.target.closest('a.item-link, a.card-link');
    if (!a) return;
    const target = document.getElementById(a.getAttribute('href').slice(1));
    if (!target) return;
    e.preventDefault();
    target.scrollIntoView({ block: 'start' });
    target.focus({ preventScroll: true });
    history.replaceState(null, '', a.getAttribute('href'));
  });

  function renderInvites(invs) {
    const list = $('invites');
    if (!invs || !invs.length) { list.replaceChildren(); return; }
    const now = Date.now();
    const live = invs.filter((i) => !i.revoked_at && Date.parse(i.expires_at) > now
      && (i.max_uses === null || i.used_count < i.max_uses));
    // Each open invitation with its label, and a Revoke button: it admits
    // nobody else afterwards (who already joined stays).
    list.replaceChildren(
      el('li', { text: `${live.length} open invitation${live.length === 1 ? '' : 's'}${live.length > 10 ? ' (newest 10 below)' : ''}` }),
      ...live.slice(0, 10).map((i) => {
        const name = i.label ? `“${i.label}”` : i.invite_id;
        return el('li', { class: 'invite-row', dataset: { inviteId: i.invite_id } },
          el('span', { class: i.label ? 'strong' : 'mono', text: i.label || i.invite_id }),
          ` · ${(i.capabilities || []).join(', ')} · used ${i.used_count}${i.max_uses === null ? '' : ` of ${i.max_uses}`} · until `, when(i.expires_at), ' ',
          el('button', { type: 'button', class: 'secondary small-button', 'aria-label': `Revoke invitation ${name}`, text: 'Revoke',
            onclick: (e) => act(e.currentTarget, `revoke the invitation ${name}`, async () => {
              await api('POST', '/workspace/invite/revoke', { invite_id: i.invite_id });
              setTimeout(() => setNotice(`Revoked the invitation ${name}: it admits nobody else.`, 'action'), 0);
            }) }));
      }));
  }

  // renderKeyed keeps one node per item (data-key) and rebuilds a node only
  // when its item changed. What the user typed into a rebuilt node, and the
  // focus, are carried over, so a change elsewhere never eats an answer.
  function renderKeyed(container, items, keyOf, build, extraSig, emptyText) {
    const old = new Map();
    for (const n of container.querySelectorAll(':scope > [data-key]')) old.set(n.dataset.key, n);
    const nodes = items.map((item) => {
      const key = keyOf(item);
      const sig = JSON.stringify(item) + extraSig;
      const prev = old.get(key);
      old.delete(key);
      if (prev && prev.dataset.sig === sig) return prev;
      const node = build(item);
      node.dataset.key = key;
      node.dataset.sig = sig;
      if (prev) carryOver(prev, node);
      return node;
    });
    for (const n of old.values()) n.remove();
    if (!nodes.length) {
      const only = container.children.length === 1 ? container.firstElementChild : null;
      if (!only || !only.classList.contains('empty') || only.textContent !== emptyText) {
        container.replaceChildren(el('p', { class: 'empty', text: emptyText }));
      }
      return;
    }
    for (const n of container.querySelectorAll(':scope > :not([data-key])')) n.remove();
    nodes.forEach((n, i) => {
      if (container.children[i] !== n) container.insertBefore(n, container.children[i] || null);
    });
  }

  function carryOver(prev, next) {
    const focused = prev.contains(document.activeElement) ? document.activeElement.dataset.keep : undefined;
    for (const f of prev.querySelectorAll('[data-keep]')) {
      if (!f.dataset.touched) continue;
      const g = [...next.querySelectorAll('[data-keep]')].find((x) => x.dataset.keep === f.dataset.keep);
      if (!g) continue;
      if (f.type === 'checkbox') g.checked = f.checked; else g.value = f.value;
      g.dataset.touched = '1';
    }
    prev.replaceWith(next);
    if (focused !== undefined) {
      const g = [...next.querySelectorAll('[data-keep]')].find((x) => x.dataset.keep === focused);
      if (g) g.focus();
    }
  }

  // keep marks a control whose value survives a re-render of its card.
  function keep(node, key) {
    node.dataset.keep = key;
    node.addEventListener('input', () => { node.dataset.touched = '1'; });
    node.addEventListener('change', () => { node.dataset.touched = '1'; });
    return node;
  }

  const badge = (status) => el('span', { class: `badge s-${status}`, text: status.replace(/_/g, ' ') });

  // ---- proposals -----------------------------------------------------------

  // A proposal card reads like a pull request: what it replaces (a whole
  // document unmistakably), whether the document moved since its base,
  // and the red/green diff against the text as it is now (and against its
  // base when it moved). The host decides in one step: "Approve and
  // commit" when the host may commit; otherwise the card says who commits
  // next, and shows who did once they have.
  function renderProposal(p) {
    const h = newID('prop');
    const actions = [];
    const whole = p.scope === 'document';
    const what = whole ? 'whole-document proposal' : 'proposal';
    const open = p.status === 'pending' || p.status === 'approved';
    const stale = open && currentVersion && p.base_version !== currentVersion;
    const proposer = who(p.participant_id);
    const mayCommitThis = mayCommit && (isOperator || may('admin') || p.participant_id === me);
    if (p.status === 'pending' && may('approve')) {
      if (mayCommitThis) {
        actions.push(el('button', { type: 'button', class: 'approve', 'aria-label': `Approve and commit ${what} “${p.summary}”`, text: 'Approve and commit',
          onclick: (e) => approveAndCommit(e.currentTarget, p, what) }));
      } else {
        actions.push(el('button', { type: 'button', class: 'approve', 'aria-label': `Approve ${what} “${p.summary}”`, text: 'Approve',
          onclick: (e) => act(e.currentTarget, `approve the ${what}`, () => api('POST', '/workspace/proposal/review', { proposal_id: p.proposal_id, approve: true })) }));
      }
      actions.push(el('button', { type: 'button', class: 'secondary', 'aria-label': `Reject ${what} “${p.summary}”`, text: 'Reject',
        onclick: (e) => act(e.currentTarget, `reject the ${what}`, () => api('POST', '/workspace/proposal/review', { proposal_id: p.proposal_id, approve: false })) }));
    } else if (p.status === 'approved' && mayCommitThis) {
      actions.push(el('button', { type: 'button', 'aria-label': `Commit ${what} “${p.summary}”`, text: 'Commit',
        onclick: (e) => commitProposal(e.currentTarget, p, what) }));
    }
    let next = null;
    if (p.status === 'approved') {
      next = el('p', { class: 'line next' }, `Approved by ${who(p.reviewed_by)}, not in the file yet. `,
        mayCommit ? `Commit it here, or leave it to ${proposer}, who proposed it.` : `${proposer}, who proposed it, commits it next (or the host).`);
    } else if (p.status === 'pending' && !mayCommit) {
      next = el('p', { class: 'line next' }, `After approval, ${proposer}, who proposed it, commits it.`);
    } else if (p.status === 'committed') {
      next = el('p', { class: 'line next' }, `Committed as version ${p.committed_version}${p.committed_by ? ` by ${who(p.committed_by)}` : ''}.`);
    }
    const refusal = commitRefusals.get(p.proposal_id);
    return el('article', { id: `proposal-${p.proposal_id}`, tabindex: '-1',
      class: `card proposal${whole ? ' whole-document' : ''}${open ? '' : ' closed'}`, 'aria-labelledby': h,
      dataset: { proposalId: p.proposal_id, scope: p.scope || '', status: p.status } },
      el('h3', { id: h, text: p.summary || '(no summary)' }),
      whole ? el('p', { class: 'line scope-document', role: 'note' }, el('span', { class: 'badge s-whole', text: 'whole document' }),
        ' Committing this replaces the entire file, every section of it.') : null,
      el('p', { class: 'line' }, badge(p.status), ` · base v${p.base_version} · `, el('span', { class: 'strong', text: p.target })),
      el('p', { class: 'line muted' }, `by ${proposer} · `, when(p.created_at),
        p.committed_version ? ` · committed as v${p.committed_version}` : '',
        p.reviewed_by ? ` · reviewed by ${who(p.reviewed_by)}` : ''),
      stale ? el('p', { class: 'line stale-warning' }, el('span', { class: 'badge s-stale', text: 'document changed' }),
        ` The document changed since this was proposed (based on v${p.base_version}, now v${currentVersion}): committing it will be refused. Its change against its base is shown below too.`) : null,
      refusal ? refusalBlock(refusal) : null,
      open ? proposalDiffBlock(p) : null,
      p.change ? proposedText(p) : null,
      next,
      actions.length ? el('div', { class: 'actions' }, actions) : null);
  }

  // commitRefusals keeps the engine's last refusal of a commit from this
  // page (e.g. stale_version with its diff) per proposal, so the card shows
  // it after the proposal's new state re-renders the card.
  const commitRefusals = new Map();

  function refusalBlock(r) {
    return el('div', { class: 'refusal', role: 'alert' },
      el('p', { class: 'line strong', text: `The room refused the commit: ${r.message}` }),
      r.diff ? el('details', { open: true }, el('summary', { text: `Its diff: the text now (v${r.current}) against what the commit would have written` }), diffView(r.diff, r.truncated)) : null);
  }

  async function commitOrRecord(p) {
    try {
      await api('POST', '/workspace/commit', { proposal_id: p.proposal_id });
      commitRefusals.delete(p.proposal_id);
    } catch (e) {
      if (e.data && e.code) {
        commitRefusals.set(p.proposal_id, { message: e.message, diff: e.data.diff || '', truncated: !!e.data.diff_truncated, current: e.data.current_version });
      }
      throw e;
    }
  }

  function approveAndCommit(button, p, what) {
    return act(button, `approve and commit the ${what}`, async () => {
      await api('POST', '/workspace/proposal/review', { proposal_id: p.proposal_id, approve: true });
      await commitOrRecord(p);
    });
  }

  function commitProposal(button, p, what) {
    return act(button, `commit the ${what}`, () => commitOrRecord(p));
  }

  // ---- diffs -----------------------------------------------------------------
  //
  // The room computes every diff (GET /workspace/proposal/diff, /version,
  // a stale_version refusal); the page only colours its lines, as text. A
  // line is shown up to DIFF_LINE_CHARS characters and a diff up to
  // DIFF_LINES lines, so a 1 MB single line cannot stall the page.

  const DIFF_LINE_CHARS = 4000;
  const DIFF_LINES = 4000;

  function diffView(text, truncated) {
    const lines = text.split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    const rows = [];
    for (const line of lines.slice(0, DIFF_LINES)) {
      let cls = 'ctx';
      if (line.startsWith('+++') || line.startsWith('---')) cls = 'file';
      else if (line.startsWith('@@')) cls = 'hunk';
      else if (line.startsWith('+')) cls = 'add';
      else if (line.startsWith('-')) cls = 'del';
      const shown = line.length > DIFF_LINE_CHARS ? `${line.slice(0, DIFF_LINE_CHARS)}… (${line.length - DIFF_LINE_CHARS} more characters)` : line;
      rows.push(el('div', { class: `dl ${cls}`, text: shown }));
    }
    if (lines.length > DIFF_LINES) rows.push(el('div', { class: 'dl note', text: `… ${lines.length - DIFF_LINES} more lines not shown` }));
    if (truncated) rows.push(el('div', { class: 'dl note', text: '… the room cut this diff at its size bound' }));
    if (!rows.length) rows.push(el('div', { class: 'dl note', text: 'No change.' }));
    return el('div', { class: 'diff', role: 'group', 'aria-label': 'Diff: removed lines start with −, added lines with +' }, rows);
  }

  const proposalDiffs = new Map(); // `${proposal_id}@${version}` -> the room's answer

  function proposalDiffBlock(p) {
    const key = `${p.proposal_id}@${currentVersion}`;
    const box = el('div', { class: 'proposal-diff', dataset: { diffFor: p.proposal_id } });
    const fill = (target, d) => {
      const whole = d.scope === 'document';
      target.replaceChildren(...[
        el('h4', {}, whole ? 'Diff against the whole document as it is now' : `Diff against ${d.section} as it is now`,
          el('span', { class: 'counts', text: ` (+${d.added} −${d.removed}, v${d.current_version})` })),
        d.section_missing ? el('p', { class: 'line muted', text: 'That section is no longer in the document.' }) : null,
        diffView(d.diff, d.diff_truncated),
        d.base_diff ? el('details', { class: 'base-diff' }, el('summary', { text: `What it changes against its base, v${d.base_version}` }), diffView(d.base_diff, d.base_diff_truncated)) : null,
      ].filter(Boolean));
    };
    if (proposalDiffs.has(key)) {
      fill(box, proposalDiffs.get(key));
      return box;
    }
    box.append(el('p', { class: 'line muted', text: 'Loading the diff…' }));
    api('GET', `/workspace/proposal/diff?proposal_id=${encodeURIComponent(p.proposal_id)}`).then((d) => {
      proposalDiffs.set(key, d);
      for (const b of document.querySelectorAll('[data-diff-for]')) if (b.dataset.diffFor === p.proposal_id) fill(b, d);
    }, (e) => {
      box.replaceChildren(el('p', { class: 'line muted', text: `The diff could not be read: ${e.message}` }));
    });
    return box;
  }

  // The room view carries no proposed text (up to 256 KiB a proposal), only
  // its size: the text is read when the host opens "Proposed text", once,
  // and a card rebuilt meanwhile stays open with it.
  const proposalTexts = new Map(); // proposal_id -> the proposed text
  const openProposals = new Set(); // proposal ids whose text is shown

  const sizeText = (n) => (n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);

  function proposedText(p) {
    const change = p.change;
    const id = p.proposal_id;
    const pre = el('pre', {});
    const label = `${change.section ? `Proposed text for ${change.section}` : 'Proposed text (whole document)'} · ${sizeText(change.content_bytes || 0)}`;
    const d = el('details', { class: 'proposed' }, el('summary', { text: label }), pre);
    const show = async () => {
      if (pre.dataset.shown) return;
      pre.dataset.shown = '1';
      if (proposalTexts.has(id)) { pre.textContent = proposalTexts.get(id); return; }
      pre.textContent = 'Loading…';
      try {
        const full = await api('GET', `/workspace/proposal?proposal_id=${encodeURIComponent(id)}`);
        const text = (full && full.change && full.change.content) || '';
        proposalTexts.set(id, text);
        pre.textContent = text;
      } catch (e) {
        pre.textContent = '';
        delete pre.dataset.shown;
        d.open = false;
        setNotice(e.status === 401 ? SIGNED_OUT : `Could not read the proposal: ${e.message}`, 'action');
      }
    };
    d.addEventListener('toggle', () => {
      if (d.open) { openProposals.add(id); show(); } else openProposals.delete(id);
    });
    if (openProposals.has(id)) { d.open = true; show(); }
    return d;
  }

  // ---- handoffs ------------------------------------------------------------

  const LIVE_HANDOFF = new Set(['open', 'accepted', 'result_ready']);

  function sortHandoffs(hs) {
    const rank = (h) => (h.status === 'result_ready' || (h.inputs || []).some((i) => i.status === 'open') ? 0
      : LIVE_HANDOFF.has(h.status) ? 1 : 2);
    return hs.slice().sort((a, b) => rank(a) - rank(b) || (b.created_at || '').localeCompare(a.created_at || ''));
  }

  function renderHandoff(h) {
    const hid = newID('handoff');
    const parts = [];
    parts.push(el('h3', { id: hid, text: h.summary || '(no summary)' }));
    parts.push(el('p', { class: 'line' }, badge(h.status),
      h.task_status ? [' · task ', el('span', { class: 'mono', text: h.task_status.replace(/_/g, ' ') })] : '',
      ' · ', when(h.created_at)));
    let assignee;
    if (h.assignee_id) assignee = who(h.assignee_id);
    else if (h.requested_assignee_id) assignee = `${who(h.requested_assignee_id)} (asked, not accepted yet)`;
    else assignee = 'anyone who accepts';
    parts.push(el('p', { class: 'line parties' }, el('span', { class: 'strong', text: who(h.owner_id) }),
      ' → ', el('span', { class: 'strong', text: assignee })));
    if (h.target) parts.push(el('p', { class: 'line muted' }, 'About ', el('span', { class: 'strong', text: h.target })));
    if (h.constraints) parts.push(el('details', {}, el('summary', { text: 'Constraints' }), el('p', { class: 'pre', text: h.constraints })));

    const inputs = h.inputs || [];
    const open = inputs.filter((i) => i.status === 'open');
    const closed = inputs.filter((i) => i.status !== 'open');
    if (open.length) {
      parts.push(el('h4', { text: open.length === 1 ? `${who(h.assignee_id)} asks` : `${who(h.assignee_id)} asks ${open.length} questions` }));
      const mayAnswer = h.owner_id === me || may('admin');
      for (const i of open) parts.push(mayAnswer ? answerForm(h, i) : el('p', { class: 'line' }, el('span', { class: 'strong', text: i.message }), ' · waiting for the answer of ', who(h.owner_id)));
    }
    if (closed.length) {
      parts.push(el('details', { class: 'asked' }, el('summary', { text: `Earlier questions (${closed.length})` }),
        el('ul', { class: 'plain small' }, closed.map((i) => el('li', {}, el('span', { class: 'strong', text: i.message }),
          ` · ${i.status}`, i.response ? [': ', el('span', { class: 'mono', text: answerText(i.response) })] : '')))));
    }

    if (h.result) parts.push(resultBlock(h));
    if (h.decided_at) {
      parts.push(el('p', { class: 'line' }, `${h.status === 'approved' ? 'Approved' : 'Rejected'} by ${who(h.decided_by)} · `, when(h.decided_at),
        h.decision_note ? ` · “${h.decision_note}”` : ''));
    }
    if (h.cancelled_at) {
      parts.push(el('p', { class: 'line' }, `Cancelled by ${who(h.cancelled_by) || 'the room'} · `, when(h.cancelled_at),
        h.cancel_reason ? ` · ${h.cancel_reason}` : ''));
    }

    const actions = [];
    if (h.status === 'open' && may('checkout') && h.owner_id !== me && (!h.requested_assignee_id || h.requested_assignee_id === me)) {
      actions.push(el('div', { class: 'actions' }, el('button', { type: 'button', 'aria-label': `Accept handoff “${h.summary}”`, text: 'Accept',
        onclick: (e) => act(e.currentTarget, 'accept the handoff', () => api('POST', '/workspace/handoff/accept', { handoff_id: h.handoff_id })) })));
    }
    if (h.status === 'accepted' && h.assignee_id === me && may('checkout')) actions.push(completeForm(h));
    if (h.status === 'result_ready' && may('approve')) {
      const noteID = newID('note');
      const note = keep(el('input', { type: 'text', id: noteID, maxlength: 2000, autocomplete: 'off' }), 'note');
      actions.push(el('div', { class: 'field' }, el('label', { for: noteID, text: 'Decision note (optional)' }), note));
      const decide = (what) => (e) => act(e.currentTarget, `${what} the result`,
        () => api('POST', `/workspace/handoff/${what}`, { handoff_id: h.handoff_id, note: note.value.trim() }));
      actions.push(el('div', { class: 'actions' },
        el('button', { type: 'button', class: 'approve', 'aria-label': `Approve result of “${h.summary}”`, text: 'Approve', onclick: decide('approve') }),
        el('button', { type: 'button', class: 'secondary', 'aria-label': `Reject result of “${h.summary}”`, text: 'Reject', onclick: decide('reject') })));
    }
    if ((h.status === 'open' || h.status === 'accepted') && (h.task_status === 'working' || h.task_status === 'input_required') && (h.owner_id === me || may('admin'))) {
      actions.push(el('div', { class: 'actions' }, el('button', { type: 'button', class: 'danger', 'aria-label': `Cancel handoff “${h.summary}”`, text: 'Cancel handoff',
        onclick: (e) => act(e.currentTarget, 'cancel the handoff', () => api('POST', '/workspace/task/cancel', { task_id: h.task_id })) })));
    }
    parts.push(...actions);
    return el('article', { id: `handoff-${h.handoff_id}`, tabindex: '-1', class: `card handoff${LIVE_HANDOFF.has(h.status) ? '' : ' closed'}`, 'aria-labelledby': hid,
      dataset: { handoffId: h.handoff_id, status: h.status } }, parts);
  }

  // completeForm is the assignee's delivery: the result as plain text.
  function completeForm(h) {
    const id = newID('result');
    const text = keep(el('textarea', { id, rows: 4 }), 'result');
    const failed = keep(el('input', { type: 'checkbox', id: `${id}-err` }), 'result-error');
    return el('div', { class: 'complete' },
      el('div', { class: 'field' }, el('label', { for: id, text: 'Result' }), text),
      el('div', { class: 'field check' }, failed, el('label', { for: `${id}-err`, text: 'It could not be done' })),
      el('div', { class: 'actions' }, el('button', { type: 'button', 'aria-label': `Complete handoff “${h.summary}”`, text: 'Complete',
        onclick: (e) => act(e.currentTarget, 'complete the handoff', () => api('POST', '/workspace/handoff/complete',
          { handoff_id: h.handoff_id, result: { text: text.value, is_error: failed.checked } })) })));
  }

  function resultBlock(h) {
    const r = h.result;
    const text = r.text || '';
    const long = text.length > RESULT_PREVIEW;
    return el('div', { class: `result${r.is_error ? ' error' : ''}` },
      el('h4', { text: r.is_error ? 'Result (the assignee reports it could not be done)' : 'Result' }),
      el('p', { class: 'line muted' }, 'Delivered ', when(h.result_at)),
      el('pre', { class: 'preview', text: long ? `${text.slice(0, RESULT_PREVIEW)}…` : text }),
      long ? el('details', {}, el('summary', { text: `Show all (${text.length} characters)` }), el('pre', { text })) : null,
      (r.artifacts && r.artifacts.length) ? el('ul', { class: 'plain small' },
        r.artifacts.map((a) => el('li', {}, el('span', { class: 'mono', text: a.uri }), a.title ? ` · ${a.title}` : ''))) : null);
  }

  function answerText(resp) {
    if (resp && resp.action && resp.action !== 'accept') return resp.action;
    const c = resp && resp.content;
    if (c && typeof c === 'object') return Object.entries(c).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : v}`).join('; ');
    return JSON.stringify(resp);
  }

  // answerForm builds a form from the request's requested_schema (an MCP
  // elicitation form schema: flat properties of string, number, integer,
  // boolean, enums, and arrays of enum values).
  function answerForm(h, input) {
    const schema = (input.requested_schema && typeof input.requested_schema === 'object') ? input.requested_schema : {};
    const props = (schema.properties && typeof schema.properties === 'object' && Object.keys(schema.properties).length)
      ? schema.properties : { answer: { type: 'string' } };
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(props).map(([name, prop]) => field(`${input.key}\u0000${name}`, name, prop || {}, required.has(name)));
    const legendID = newID('q');
    const submit = el('button', { type: 'submit', text: 'Send answer', 'aria-label': `Send answer to “${input.message}”` });
    const decline = el('button', { type: 'button', class: 'secondary', text: 'Decline', 'aria-label': `Decline to answer “${input.message}”` });
    const form = el('form', { class: 'answer', 'aria-labelledby': legendID, novalidate: false, dataset: { inputKey: input.key } },
      el('fieldset', {},
        el('legend', { id: legendID, text: input.message }),
        fields.map((f) => f.node),
        el('div', { class: 'actions' }, submit, decline)));
    const send = (btn, response) => act(btn, 'send the answer', () => api('POST', '/workspace/task/update',
      { task_id: h.task_id, input_responses: { [input.key]: response } }));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (!form.reportValidity()) return;
      const content = {};
      for (const f of fields) {
        const v = f.read();
        if (v !== undefined) content[f.name] = v;
      }
      send(submit, { action: 'accept', content });
    });
    decline.addEventListener('click', () => send(decline, { action: 'decline' }));
    return form;
  }

  function enumOptions(prop) {
    if (Array.isArray(prop.enum)) {
      const labels = Array.isArray(prop.enumNames) ? prop.enumNames : [];
      return prop.enum.map((v, i) => ({ value: v, label: labels[i] !== undefined ? String(labels[i]) : String(v) }));
    }
    const alts = Array.isArray(prop.oneOf) ? prop.oneOf : Array.isArray(prop.anyOf) ? prop.anyOf : null;
    if (alts && alts.every((a) => a && 'const' in a)) return alts.map((a) => ({ value: a.const, label: a.title !== undefined ? String(a.title) : String(a.const) }));
    return null;
  }

  // field returns {name, node, read}; read() gives the JSON value to send,
  // or undefined to leave the property out.
  function field(keepKey, name, prop, required) {
    const id = newID('f');
    const hintID = prop.description ? newID('hint') : undefined;
    // The default schema's one field is called "answer"; say so in words.
    const title = prop.title || (name === 'answer' ? 'Your answer' : name);
    const labelText = `${title}${required ? ' (required)' : ''}`;
    const hint = hintID ? el('span', { id: hintID, class: 'hint', text: prop.description }) : null;
    const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
    const common = { id, 'aria-describedby': hintID, required: required || undefined };

    if (type === 'boolean') {
      const box = keep(el('input', { ...common, type: 'checkbox', required: undefined }), keepKey);
      box.checked = prop.default === true;
      return { name, node: el('div', { class: 'field check' }, box, el('label', { for: id, text: title }), hint), read: () => box.checked };
    }

    if (type === 'array') {
      const opts = enumOptions(prop.items || {}) || [];
      const boxes = opts.map((o, i) => {
        const bid = `${id}-${i}`;
        const b = keep(el('input', { type: 'checkbox', id: bid }), `${keepKey}\u0000${i}`);
        b.checked = Array.isArray(prop.default) && prop.default.includes(o.value);
        return { o, b, node: el('div', { class: 'check' }, b, el('label', { for: bid, text: o.label })) };
      });
      return {
        name,
        node: el('fieldset', { class: 'field group', 'aria-describedby': hintID }, el('legend', { text: labelText }), hint, boxes.map((x) => x.node)),
        read: () => {
          const vals = boxes.filter((x) => x.b.checked).map((x) => x.o.value);
          return vals.length || required ? vals : undefined;
        },
      };
    }

    const options = enumOptions(prop);
    if (options) {
      const sel = keep(el('select', common,
        required ? el('option', { value: '', text: 'Choose…', disabled: true, selected: prop.default === undefined }) : el('option', { value: '', text: '(no answer)' }),
        options.map((o, i) => el('option', { value: String(i), text: o.label, selected: prop.default !== undefined && o.value === prop.default }))), keepKey);
      return { name, node: el('div', { class: 'field' }, el('label', { for: id, text: labelText }), hint, sel),
        read: () => (sel.value === '' ? undefined : options[Number(sel.value)].value) };
    }

    if (type === 'number' || type === 'integer') {
      const inp = keep(el('input', { ...common, type: 'number', inputmode: type === 'integer' ? 'numeric' : 'decimal',
        step: type === 'integer' ? '1' : 'any', min: prop.minimum, max: prop.maximum }), keepKey);
      if (typeof prop.default === 'number') inp.value = String(prop.default);
      return { name, node: el('div', { class: 'field' }, el('label', { for: id, text: labelText }), hint, inp),
        read: () => (inp.value === '' ? undefined : Number(inp.value)) };
    }

    // Strings (and anything else, sent as text).
    const fmt = { email: 'email', uri: 'url', date: 'date' }[prop.format];
    let inp;
    if (fmt || (typeof prop.maxLength === 'number' && prop.maxLength <= 200)) {
      inp = el('input', { ...common, type: fmt || 'text', minlength: prop.minLength, maxlength: prop.maxLength, pattern: prop.pattern, autocomplete: 'off' });
    } else {
      inp = el('textarea', { ...common, rows: 3, minlength: prop.minLength, maxlength: prop.maxLength });
    }
    keep(inp, keepKey);
    if (typeof prop.default === 'string') inp.value = prop.default;
    return { name, node: el('div', { class: 'field' }, el('label', { for: id, text: labelText }), hint, inp),
      read: () => (inp.value === '' && !required ? undefined : inp.value) };
  }

  // ---- the invitation ------------------------------------------------------

  // showInvite puts a new invitation's URI in the one invitation box, with
  // what it is for.
  function showInvite(g, text) {
    const uri = $('invite-uri');
    uri.value = g.uri;
    $('invite-result').hidden = false;
    $('invite-status').textContent = text;
    uri.focus();
    uri.select();
  }

  function setupInvite() {
    const create = $('invite-create');
    const out = $('invite-result');
    const uri = $('invite-uri');
    const status = $('invite-status');
    create.addEventListener('click', () => act(create, 'create an invitation', async () => {
      const label = $('invite-label').value.trim();
      const g = await api('POST', '/workspace/invite', label ? { label } : {});
      $('invite-label').value = '';
      showInvite(g, `${label ? `“${label}”: ` : ''}Works once, until ${new Date(g.expires_at).toLocaleString()}. Copy it now: it is not shown again.`);
    }));
    $('invite-copy').addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(uri.value);
        status.textContent = 'Copied to the clipboard.';
      } catch {
        uri.focus();
        uri.select();
        const ok = document.execCommand && document.execCommand('copy');
        status.textContent = ok ? 'Copied to the clipboard.' : 'Copying was refused: the text is selected, copy it with the keyboard.';
      }
    });
  }

  // ---- the document and its history ---------------------------------------
  //
  // The room renders the Markdown (GET /page/document: no raw HTML, links
  // only to http(s)/mailto, images as links); it is the one piece of room
  // text this page inserts as markup. Headings carry their section's path,
  // so sections someone leases or has a proposal for are marked here.
  // Older and Newer step through the versions, each with its diff from the
  // one before (GET /workspace/version).

  // safeNodes rebuilds the room's rendering with this page's own element
  // builder, keeping only an allow-list of tags and attributes: the markup
  // is parsed in an inert document (nothing in it runs or loads) and never
  // moved into the page as it is, so even a fault in the renderer cannot
  // bring script, styles, frames or foreign loads in.
  const SAFE_TAGS = new Set(['P', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'UL', 'OL', 'LI', 'A', 'EM', 'STRONG', 'CODE', 'PRE',
    'BLOCKQUOTE', 'HR', 'BR', 'TABLE', 'THEAD', 'TBODY', 'TR', 'TH', 'TD', 'DEL', 'INPUT']);
  const SAFE_ATTRS = { A: ['href', 'title'], H1: ['data-path'], H2: ['data-path'], H3: ['data-path'], H4: ['data-path'], H5: ['data-path'], H6: ['data-path'],
    OL: ['start'], TH: ['align'], TD: ['align'], INPUT: ['checked'] };
  const safeHref = (u) => /^(https?:|mailto:|#)/i.test(u);

  function safeNodes(html) {
    const parsed = new DOMParser().parseFromString(html, 'text/html');
    const copy = (n) => {
      if (n.nodeType === Node.TEXT_NODE) return document.createTextNode(n.data);
      if (n.nodeType !== Node.ELEMENT_NODE) return null;
      const kids = [...n.childNodes].map(copy).filter(Boolean);
      if (!SAFE_TAGS.has(n.tagName)) return document.createTextNode(n.textContent);
      if (n.tagName === 'INPUT' && n.getAttribute('type') !== 'checkbox') return null;
      const attrs = {};
      for (const a of SAFE_ATTRS[n.tagName] || []) if (n.hasAttribute(a)) attrs[a] = n.getAttribute(a);
      if (n.tagName === 'A') {
        if ('href' in attrs && !safeHref(attrs.href)) {
          // A link the room would not keep is shown as its text only.
          return el('span', { class: 'inert-link', title: 'link removed: not a web address' }, kids);
        }
        if (attrs.href && !attrs.href.startsWith('#')) Object.assign(attrs, { rel: 'noopener noreferrer', target: '_blank' });
      }
      if (n.tagName === 'INPUT') Object.assign(attrs, { type: 'checkbox', disabled: true, 'aria-label': 'task item' });
      const level = /^H([1-6])$/.exec(n.tagName);
      if (level) {
        // The document's headings sit under the page's own "Document"
        // heading: shown at their level, announced two levels deeper, and
        // not h1/h2 elements, so the page keeps one h1 and its own sections.
        return el('p', { ...attrs, class: `doc-h doc-h${level[1]}${attrs['data-path'] ? ' doc-section' : ''}`, role: 'heading',
          'aria-level': String(Math.min(Number(level[1]) + 2, 6)) }, kids);
      }
      return el(n.tagName.toLowerCase(), attrs, kids);
    };
    return [...parsed.body.childNodes].map(copy).filter(Boolean);
  }

  let docShown = 0;   // 0: following the current version; else the version shown
  let docVersion = 0; // the version on screen
  let docSeq = 0;

  async function loadDocument(version) {
    const seq = ++docSeq;
    docShown = version;
    try {
      const [doc, step] = await Promise.all([
        api('GET', `/page/document${version ? `?version=${version}` : ''}`),
        api('GET', `/workspace/version?version=${version || currentVersion || 1}`),
      ]);
      if (seq !== docSeq) return;
      docVersion = doc.version;
      const box = $('document');
      box.replaceChildren(...safeNodes(doc.html));
      box.dataset.version = String(doc.version);
      $('doc-note').textContent = doc.truncated ? `Part of this version (${sizeText(doc.bytes)}) is not shown here (very long lines are cut); read all of it with ce or workspace_read.` : '';
      const latest = step.latest;
      $('doc-where').textContent = `Version ${doc.version} of ${latest}${doc.version === latest ? ' (current)' : ''}: ${step.summary || ''}${step.participant_id ? ` · by ${who(step.participant_id)}` : ''}`;
      $('doc-older').disabled = doc.version <= 1;
      $('doc-newer').disabled = doc.version >= latest;
      $('doc-current').disabled = doc.version >= latest && docShown === 0;
      $('doc-changes-summary').textContent = `What version ${doc.version} changed (+${step.added} −${step.removed})`;
      $('doc-diff').replaceWith(Object.assign(diffView(step.diff, step.diff_truncated), { id: 'doc-diff' }));
      markSections();
    } catch (e) {
      if (seq === docSeq) setNotice(e.status === 401 ? SIGNED_OUT : `Could not read the document: ${e.message}`, 'refresh');
    }
  }

  function markSections() {
    const box = $('document');
    if (docShown !== 0 && docVersion !== currentVersion) {
      for (const m of box.querySelectorAll('.section-mark')) m.remove();
      return;
    }
    const leased = new Map();
    for (const l of leasesNow) leased.set(l.target, who(l.participant_id));
    const proposed = new Map();
    for (const p of proposalsByID.values()) {
      if (p.status !== 'pending' && p.status !== 'approved') continue;
      const key = p.scope === 'document' ? 'workspace' : (p.change && p.change.section) || p.target;
      if (!proposed.has(key)) proposed.set(key, []);
      proposed.get(key).push(p);
    }
    for (const m of box.querySelectorAll('.section-mark')) m.remove();
    for (const hd of box.querySelectorAll('[data-path]')) {
      const path = hd.dataset.path;
      hd.classList.toggle('leased', leased.has(path));
      hd.classList.toggle('proposed', proposed.has(path));
      const marks = [];
      if (leased.has(path)) marks.push(el('span', { class: 'section-mark badge s-leased', text: `leased by ${leased.get(path)}` }));
      for (const p of proposed.get(path) || []) {
        marks.push(el('a', { class: 'section-mark badge s-proposed card-link', href: `#proposal-${p.proposal_id}`, text: `proposal: ${p.summary || p.proposal_id}` }));
      }
      if (marks.length) hd.append(' ', ...marks);
    }
    const wholeDoc = proposed.get('workspace');
    if (wholeDoc && box.firstElementChild) {
      box.prepend(el('p', { class: 'section-mark whole-mark' }, el('span', { class: 'badge s-whole', text: 'whole document' }), ' A proposal would replace all of it: ',
        ...wholeDoc.map((p) => el('a', { class: 'card-link', href: `#proposal-${p.proposal_id}`, text: p.summary || p.proposal_id }))));
    }
  }

  function setupDocument() {
    $('doc-older').addEventListener('click', () => loadDocument(Math.max(1, (docVersion || currentVersion) - 1)));
    $('doc-newer').addEventListener('click', () => {
      const next = docVersion + 1;
      loadDocument(next >= currentVersion ? 0 : next);
    });
    $('doc-current').addEventListener('click', () => loadDocument(0));
  }

  // ---- working on a section, and a new handoff ----------------------------
  //
  // A participant's own work, as an agent does it through the same routes:
  // lease a section (POST /workspace/checkout), load its text, edit it in a
  // plain textarea and propose it against the version it was read at
  // (POST /workspace/propose); create a handoff (POST /workspace/handoff).

  let composeBase = 0; // the version the textarea's text was loaded from

  function renderComposeChoices(tree, participants) {
    const sel = $('compose-section');
    if (sel) {
      const keepValue = sel.value;
      sel.replaceChildren(...tree.map((r) => el('option', { value: r.path, text: r.path, selected: r.path === keepValue })));
    }
    const pick = $('handoff-assignee');
    if (pick) {
      const keepValue = pick.value;
      pick.replaceChildren(el('option', { value: '', text: 'Anyone who accepts' }),
        ...participants.filter((p) => p.participant_id !== me).map((p) => el('option', { value: p.participant_id, text: p.name, selected: p.participant_id === keepValue })));
    }
  }

  function setupCompose() {
    const lease = $('compose-lease');
    if (lease) {
      lease.addEventListener('click', () => {
        const target = $('compose-section').value;
        act(lease, `lease ${target}`, async () => {
          await api('POST', '/workspace/checkout', { target });
          setTimeout(() => setNotice(`You hold a lease on ${target}.`, 'action'), 0);
        });
      });
    }
    const load = $('compose-load');
    if (load) {
      load.addEventListener('click', () => act(load, 'read the section', async () => {
        const section = $('compose-section').value;
        const r = await api('GET', `/workspace/read?section=${encodeURIComponent(section)}`);
        $('compose-text').value = r.content;
        composeBase = r.version;
      }));
      $('compose-section').addEventListener('change', () => { composeBase = 0; });
    }
    const propose = $('compose-propose');
    if (propose) {
      propose.addEventListener('click', () => {
        const section = $('compose-section').value;
        act(propose, `propose a change to ${section}`, async () => {
          await api('POST', '/workspace/propose', { target: section, base_version: composeBase || currentVersion,
            summary: $('compose-summary').value.trim(), change: { section, content: $('compose-text').value } });
          $('compose-text').value = '';
          $('compose-summary').value = '';
          composeBase = 0;
          setTimeout(() => setNotice(`Proposed a change to ${section}: it waits for review.`, 'action'), 0);
        });
      });
    }
    const create = $('handoff-create');
    if (create) {
      create.addEventListener('click', () => act(create, 'create the handoff', async () => {
        const body = { summary: $('handoff-summary').value.trim() };
        if ($('handoff-assignee').value) body.assignee = $('handoff-assignee').value;
        await api('POST', '/workspace/handoff', body);
        $('handoff-summary').value = '';
      }));
    }
  }

  // ---- start ---------------------------------------------------------------

  if ($('invite-create')) setupInvite();
  setupCompose();
  setupNotify();
  setupDocument();
  schedule(0);
  if (!may('observe')) {
    // A session without observe may not follow the room's stream: the page
    // re-reads the room now and then instead.
    setLive('off', `Live updates: off (this session lacks observe); re-reading every ${POLL_MS / 1000} s`);
    setInterval(() => { if (!signedOut) schedule(0); }, POLL_MS);
  } else if (typeof EventSource === 'function') connect();
  else setLive('off', 'Live updates: not supported by this browser');
})();
