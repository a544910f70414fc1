// The test host of the MCP App e2e test (e2e/mcp-app.test.mjs), bundled by
// esbuild into the host page: @modelcontextprotocol/ext-apps 2.0.4's own
// host side (AppBridge over PostMessageTransport), with the view behind a
// sandbox proxy on another origin (sandbox.html), as a web host does.
// The view's tools/call and resources/read go to window.mcpRelay, a
// binding the test exposes, which sends them on the test's MCP client
// session (the SDK client over `ce mcp`); nothing here reaches the room
// any other way.
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';

window.hostLog = [];

// startHost mounts the view the way a web host must: through a sandbox
// proxy on another origin (sandboxURL), which the bridge hands the view's
// HTML (read from the room as a ui:// resource) and its CSP metadata once
// the proxy says it is ready. The bridge is connected before the proxy
// loads, so that it hears the proxy and then the view's ui/initialize.
window.startHost = async (html, csp, sandboxURL) => {
  const iframe = document.createElement('iframe');
  iframe.id = 'sandbox';
  iframe.name = 'sandbox';
  iframe.setAttribute('sandbox', 'allow-scripts allow-same-origin');
  iframe.style.width = '900px';
  iframe.style.height = '700px';
  document.body.appendChild(iframe);

  const bridge = new AppBridge(null, { name: 'ce-e2e-host', version: '1.0.0' },
    { serverTools: {}, serverResources: {}, sandbox: { csp } },
    { hostContext: { theme: 'light', displayMode: 'inline', availableDisplayModes: ['inline'], platform: 'web',
      styles: { variables: { '--color-text-primary': 'rgb(10, 20, 30)' } } } });
  bridge.oncalltool = async (params) => {
    window.hostLog.push(['tools/call', params.name]);
    return window.mcpRelay('tools/call', params);
  };
  bridge.onreadresource = async (params) => window.mcpRelay('resources/read', params);
  bridge.onsandboxready = () => {
    window.hostLog.push(['sandboxready']);
    bridge.sendSandboxResourceReady({ html, csp });
  };
  bridge.oninitialized = () => { window.hostLog.push(['initialized']); };
  bridge.onsizechange = (size) => { window.hostSize = size; };
  window.bridge = bridge;

  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.src = sandboxURL;
};

// spoof starts a frame that is not the view's host (a sibling of the proxy),
// that keeps posting forged JSON-RPC to the view: answers to every id the
// view may be waiting on (a board naming "FORGED") and a tool-result
// notification, until spoofStop, which says how many messages it sent.
let spoofSent = 0;
let spoofFrame = null;
window.addEventListener('message', (ev) => {
  if (spoofFrame && ev.source === spoofFrame.contentWindow && ev.data && ev.data.spoofed) spoofSent = ev.data.spoofed;
});
window.spoofCount = () => spoofSent;
window.spoofStop = () => { spoofFrame.remove(); spoofFrame = null; return spoofSent; };
window.spoofStart = () => {
  const f = document.createElement('iframe');
  f.id = 'spoofer';
  f.setAttribute('sandbox', 'allow-scripts');
  f.srcdoc = `<script>
    let sent = 0;
    const forged = { me: { participant_id: 'FORGED', capabilities: ['admin'] },
      handoffs: [{ handoff_id: 'forged', status: 'result_ready', summary: 'FORGED', owner_id: 'x' }], proposals: [] };
    const tick = () => {
      const view = parent.frames[0].frames[0];
      for (let id = 1; id <= 40; id++) {
        view.postMessage({ jsonrpc: '2.0', id, result: { content: [], structuredContent: forged, isError: false } }, '*');
        sent++;
      }
      view.postMessage({ jsonrpc: '2.0', method: 'ui/notifications/tool-result', params: { content: [], structuredContent: forged } }, '*');
      sent++;
      parent.postMessage({ spoofed: sent }, '*');
    };
    setInterval(tick, 2);
  <\/script>`;
  spoofFrame = f;
  document.body.appendChild(f);
};
