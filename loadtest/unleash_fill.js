// Fills an unleash-server with N toggles, each configured in the three environments
// `default`, `development` and `production` (a flexibleRollout with a constraint; on in
// two of them), for loadtest/migration.sh. Run from tests/unleash (it needs `pg`).
//
// Usage: node ../../loadtest/unleash_fill.js N   (env: UNLEASH_URL, ADMIN_TOKEN, PGPORT)
'use strict';

const { Client } = require(require.resolve('pg', { paths: [process.cwd()] }));

const BASE = process.env.UNLEASH_URL;
const TOKEN = process.env.ADMIN_TOKEN;
const ENVIRONMENTS = ['default', 'development', 'production'];
const PARALLEL = 8;

async function call(method, path, body) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { Authorization: TOKEN, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  }
}

async function toggle(i) {
  const name = `load-${String(i).padStart(5, '0')}`;
  const features = '/api/admin/projects/default/features';
  await call('POST', features, { name });
  for (const [e, environment] of ENVIRONMENTS.entries()) {
    await call('POST', `${features}/${name}/environments/${environment}/strategies`, {
      name: 'flexibleRollout',
      parameters: { rollout: String((i * 7 + e * 13) % 101), stickiness: 'default', groupId: name },
      constraints: [{ contextName: 'appName', operator: 'IN', values: [`app-${i % 10}`] }],
    });
    if (e !== 1) await call('POST', `${features}/${name}/environments/${environment}/on`);
  }
}

async function main() {
  const count = Number(process.argv[2] || 2000);
  const db = new Client({ host: '127.0.0.1', port: Number(process.env.PGPORT), user: 'postgres', database: 'unleash' });
  await db.connect();
  await db.query(`INSERT INTO environments (name, type, enabled, sort_order, protected)
    VALUES ('default', 'production', true, 1, true) ON CONFLICT (name) DO NOTHING`);
  await db.query(`INSERT INTO project_environments (project_id, environment_name)
    VALUES ('default', 'default') ON CONFLICT DO NOTHING`);
  await db.end();
  let next = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < count) {
        const i = next;
        next += 1;
        await toggle(i);
      }
    }),
  );
  process.stdout.write(`filled ${count} toggles x 3 environments in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

main().catch((error) => {
  process.stderr.write(`unleash_fill: ${error.stack || error}\n`);
  process.exit(1);
});
