// A minimal MCP 2026-07-28 client for one agent session: POST {mcp_url} with
// the routing headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) and
// params._meta carrying the protocol version and the client capabilities,
// declaring the Tasks extension (io.modelcontextprotocol/tasks).

export const PROTOCOL = '2026-07-28';
export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const HANDOFF_META = 'commonroom/handoff_id';

const NAME_FIELD = {
  'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri',
  'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId',
};

export class Agent {
  constructor(name, mcpURL, grant) {
    this.name = name;
    this.url = mcpURL;
    this.token = grant.session_token;
    this.id = grant.participant_id;
    this.next = 0;
  }

  // rpc sends one request and returns the JSON-RPC result; a JSON-RPC error
  // throws.
  async rpc(method, params = {}) {
    const id = ++this.next;
    const body = {
      jsonrpc: '2.0', id, method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': PROTOCOL,
          'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXT]: {} } },
          'io.modelcontextprotocol/clientInfo': { name: `ce-e2e-${this.name}`, version: '1.0.0' },
        },
      },
    };
    const headers = {
      Authorization: `Bearer ${this.token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': PROTOCOL,
      'Mcp-Method': method,
    };
    const nf = NAME_FIELD[method];
    if (nf && typeof params[nf] === 'string') headers['Mcp-Name'] = params[nf];
    const res = await fetch(this.url, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await res.text();
    let msg;
    try { msg = JSON.parse(text); } catch { throw new Error(`${this.name} ${method}: HTTP ${res.status}, not JSON: ${text.slice(0, 300)}`); }
    if (msg.error) throw new Error(`${this.name} ${method}: HTTP ${res.status} JSON-RPC ${msg.error.code} ${msg.error.message} ${JSON.stringify(msg.error.data || {})}`);
    if (msg.id !== id) throw new Error(`${this.name} ${method}: id ${msg.id}, want ${id}`);
    return msg.result;
  }

  // tool calls a tool and returns its structuredContent (or the raw result
  // for a task handle). A domain failure (isError) throws.
  async tool(name, args) {
    const r = await this.rpc('tools/call', { name, arguments: args });
    if (r.resultType === 'task') return r;
    if (r.isError) throw new Error(`${this.name} ${name}: ${JSON.stringify(r.structuredContent)}`);
    return r.structuredContent;
  }

  taskGet(taskId) { return this.rpc('tasks/get', { taskId }); }
  handoffGet(handoffId) { return this.tool('handoff_get', { handoff_id: handoffId }); }
}

// join redeems an invitation over HTTP (POST {ingress}/session/join).
export async function join(ingressURL, invite, name) {
  const res = await fetch(`${ingressURL}/session/join`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ invite, name, kind: 'agent' }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`join as ${name}: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body;
}
