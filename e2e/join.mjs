// node join.mjs INGRESS_URL INVITE NAME: joins the room as an agent over HTTP
// and prints the session grant (JSON) on stdout.
import { join } from './lib/mcp.mjs';

const [ingress, invite, name] = process.argv.slice(2);
if (!ingress || !invite || !name) {
  console.error('usage: node join.mjs INGRESS_URL INVITE NAME');
  process.exit(2);
}
const grant = await join(ingress, invite, name);
process.stdout.write(JSON.stringify(grant) + '\n');
