// Operator CLI of the ingest service (`npm run ingest-admin -- <command>`):
// tenants, users and DSNs in the metadata database of a data dir (or
// TRACE_DATABASE_URL). Safe beside a running service: each change is a
// committed row the service reads at its next call.
import { parseArgs } from 'node:util';
import path from 'node:path';
import { IngestService } from './service.ts';
import { IngestError } from './http.ts';

const USAGE = `usage: npm run ingest-admin -- [--data-dir DIR] <command>
  tenant create <tenant_id> [--name NAME] [--modelio]
  tenant modelio <tenant_id> on|off
  tenant list
  user create --email EMAIL --tenant TENANT_ID [--admin]   (password from TRACE_ADMIN_PASSWORD or stdin)
  user list
  user delete <user_id|email>   (their session cookies are refused from then on)
  dsn create --tenant TENANT_ID --name NAME [--base-url URL]   (prints the key and DSN once)
  dsn list [--tenant TENANT_ID]
  dsn revoke <dsn_id> [--tenant TENANT_ID]   (its key is refused from then on, also by a running service)
data dir: --data-dir, else TRACE_DATA_DIR, else .data/trace; metadata in PostgreSQL when TRACE_DATABASE_URL is set`;

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('password: ');
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'data-dir': { type: 'string' },
      name: { type: 'string' },
      modelio: { type: 'boolean' },
      email: { type: 'string' },
      tenant: { type: 'string' },
      admin: { type: 'boolean' },
      'base-url': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const [noun, verb, arg, arg2] = positionals;
  if (values.help || !noun) {
    process.stdout.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  const dataDir = path.resolve(values['data-dir'] ?? process.env.TRACE_DATA_DIR ?? '.data/trace');
  const svc = await IngestService.open({ dataDir, databaseUrl: process.env.TRACE_DATABASE_URL || undefined });
  const out = (v: unknown) => process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  try {
    const key = `${noun} ${verb ?? ''}`.trim();
    switch (key) {
      case 'tenant create':
        if (!arg) throw new IngestError(2, 'tenant create needs a tenant_id');
        out(await svc.createTenant(arg, { name: values.name, modelioEnabled: values.modelio ?? false }));
        break;
      case 'tenant modelio':
        if (!arg || (arg2 !== 'on' && arg2 !== 'off')) throw new IngestError(2, 'tenant modelio <tenant_id> on|off');
        out(await svc.setTenantModelio(arg, arg2 === 'on'));
        break;
      case 'tenant list':
        out(await svc.meta.tenants());
        break;
      case 'user create': {
        if (!values.email || !values.tenant) throw new IngestError(2, 'user create needs --email and --tenant');
        const password = process.env.TRACE_ADMIN_PASSWORD ?? (await readStdin());
        const u = await svc.createUser(values.email, password, values.tenant, values.admin ?? false);
        out({ user_id: u.user_id, email: u.email, tenant_id: u.tenant_id, is_admin: u.is_admin });
        break;
      }
      case 'user list':
        out((await svc.meta.users()).map(({ password_hash: _p, ...u }) => u));
        break;
      case 'user delete': {
        if (!arg) throw new IngestError(2, 'user delete needs a user_id or email');
        const { password_hash: _p, ...u } = await svc.deleteUser(arg);
        out(u);
        break;
      }
      case 'dsn create': {
        if (!values.tenant || !values.name) throw new IngestError(2, 'dsn create needs --tenant and --name');
        const minted = await svc.mintDsn(values.tenant, values.name, values['base-url'] ?? process.env.TRACE_PUBLIC_URL ?? 'http://127.0.0.1:8300');
        out({ ...svc.publicDsn(minted.record), key: minted.key, dsn: minted.dsn });
        process.stderr.write('the key is shown once: store the DSN now\n');
        break;
      }
      case 'dsn revoke':
        if (!arg) throw new IngestError(2, 'dsn revoke needs a dsn_id');
        out(svc.publicDsn(await svc.revokeDsn(arg, values.tenant)));
        break;
      case 'dsn list':
        out((await svc.meta.dsns(values.tenant)).map((d) => svc.publicDsn(d)));
        break;
      default:
        process.stderr.write(`unknown command: ${key}\n${USAGE}\n`);
        return 2;
    }
    return 0;
  } catch (err) {
    if (err instanceof IngestError) {
      process.stderr.write(`error: ${err.detail}\n`);
      return err.status === 2 ? 2 : 1;
    }
    throw err;
  } finally {
    await svc.close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  process.exitCode = await main(process.argv.slice(2));
}
