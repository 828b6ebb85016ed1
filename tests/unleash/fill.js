// Fills a fresh unleash-server (4.x–7.x, started by server.js) with a rich instance for
// tests/it/migration.rs: several projects and environments, every built-in strategy kind 7.x has and a
// custom one, constraints of many operators, a segment, strategy variants, toggle variants, a
// dependency (5.5+), tags, a context field with legal values, an archived toggle, client, backend,
// multi-project and frontend tokens, and a webhook addon. What an older version lacks is left
// out or written into its database (see `at` below).
//
// Usage: node fill.js   (env: UNLEASH_URL, ADMIN_TOKEN, PGHOST, PGPORT, PGUSER, PGDATABASE)
// Prints one JSON line: {"tokens": [{secret, type, environment, projects}]}.
'use strict';

const { Client } = require(require.resolve('pg', { paths: [process.cwd()] }));

const BASE = process.env.UNLEASH_URL;
const TOKEN = process.env.ADMIN_TOKEN;
const PROJECTS = ['default', 'web', 'mobile'];
const ENVIRONMENTS = ['default', 'development', 'production'];

function fail(message) {
  process.stderr.write(`fill: ${message}\n`);
  process.exit(1);
}

async function call(method, path, body) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { Authorization: TOKEN, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) {
    fail(`${method} ${path}: ${response.status} ${text}`);
  }
  return text ? JSON.parse(text) : null;
}

function database() {
  return new Client({
    host: process.env.PGHOST || '127.0.0.1',
    port: Number(process.env.PGPORT),
    user: process.env.PGUSER || 'postgres',
    database: process.env.PGDATABASE || 'unleash',
  });
}

// One statement on Unleash's database: its rows.
async function sql(text, values) {
  const db = database();
  await db.connect();
  try {
    return (await db.query(text, values)).rows;
  } finally {
    await db.end();
  }
}

// What a fresh 7.x cannot hold through its OSS API (MODERN-MODEL appendix): the `default`
// environment of instances begun before 7.0 (enabled: 4.x begins with it disabled, and its API
// cannot enable a protected one), and projects besides `default`.
async function prepareDatabase() {
  const db = database();
  await db.connect();
  await db.query(
    `INSERT INTO environments (name, type, enabled, sort_order, protected)
     VALUES ('default', 'production', true, 1, true)
     ON CONFLICT (name) DO UPDATE SET enabled = true`,
  );
  for (const project of PROJECTS.slice(1)) {
    await db.query(
      `INSERT INTO projects (id, name, description) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO NOTHING`,
      [project, project.toUpperCase(), `the ${project} project`],
    );
  }
  for (const project of PROJECTS) {
    for (const environment of ENVIRONMENTS) {
      await db.query(
        `INSERT INTO project_environments (project_id, environment_name) VALUES ($1, $2)
         ON CONFLICT DO NOTHING`,
        [project, environment],
      );
    }
  }
  await db.end();
}

const constraint = (contextName, operator, values, extra = {}) => ({
  contextName,
  operator,
  values,
  ...extra,
});

// The server's version: REGEX constraints come with 7.5, `backend` tokens with 7.2.
async function version() {
  const config = await call('GET', '/api/admin/ui-config');
  const text = (config.versionInfo && config.versionInfo.current && config.versionInfo.current.oss) || config.version;
  const [major, minor] = text.split('.').map(Number);
  return major * 100 + minor;
}

async function main() {
  await prepareDatabase();
  const at = await version();
  await call('POST', '/api/admin/context', {
    name: 'region',
    description: 'where the user is',
    stickiness: true,
    legalValues: [{ value: 'eu' }, { value: 'us', description: 'America' }],
  });
  // 6.x refuses constraints on fields it does not know; 7.x has `appVersion` already.
  const fields = await call('GET', '/api/admin/context');
  if (!fields.some((f) => f.name === 'appVersion')) {
    await call('POST', '/api/admin/context', { name: 'appVersion', description: 'the app version' });
  }
  await call('POST', '/api/admin/strategies', {
    name: 'byRegion',
    description: 'on in some regions',
    parameters: [{ name: 'regions', type: 'list', description: 'regions', required: false }],
  });
  await call('POST', '/api/admin/tag-types', { name: 'team', description: 'owning team' });
  const betaUsers = {
    name: 'beta-users',
    description: 'early adopters',
    constraints: [constraint('userId', 'IN', ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12'])],
  };
  // 4.x's open-source build has no segment API (its store, client API and state export do).
  const segment = at >= 500 ? await call('POST', '/api/admin/segments', betaUsers) : await sql(
    `INSERT INTO segments (name, description, constraints, created_by) VALUES ($1, $2, $3, 'fill')
     RETURNING id`,
    [betaUsers.name, betaUsers.description, JSON.stringify(betaUsers.constraints)],
  ).then((rows) => rows[0]);
  const features = (p) => `/api/admin/projects/${p}/features`;
  const create = (p, name, extra = {}) => call('POST', features(p), { name, ...extra });
  const strategy = (p, f, env, body) =>
    call('POST', `${features(p)}/${f}/environments/${env}/strategies`, body);
  const on = (p, f, env) => call('POST', `${features(p)}/${f}/environments/${env}/on`);

  // default project: every built-in strategy kind 7.x has, in every environment.
  await create('default', 'simple-on', { description: 'on everywhere', impressionData: true });
  for (const env of ENVIRONMENTS) {
    await strategy('default', 'simple-on', env, { name: 'default' });
    await on('default', 'simple-on', env);
  }
  await create('default', 'users', { type: 'permission' });
  await strategy('default', 'users', 'production', {
    name: 'default',
    constraints: [constraint('userId', 'IN', ['1', '3', '5', '7', '11'])],
  });
  await on('default', 'users', 'production');
  await create('default', 'hosts');
  await strategy('default', 'hosts', 'development', {
    name: 'applicationHostname',
    parameters: { hostNames: 'localhost,example' },
  });
  await strategy('default', 'hosts', 'development', {
    name: 'remoteAddress',
    parameters: { IPs: '10.0.0.1,192.168.1.1' },
  });
  await on('default', 'hosts', 'development');
  await create('default', 'rollout', { type: 'experiment' });
  for (const [env, rollout] of [['development', '100'], ['production', '30'], ['default', '60']]) {
    await strategy('default', 'rollout', env, {
      name: 'flexibleRollout',
      title: `${rollout} percent`,
      parameters: { rollout, stickiness: 'userId', groupId: 'rollout' },
      constraints: [
        constraint('appName', 'NOT_IN', ['legacy-app']),
        constraint('region', 'IN', ['eu', 'us']),
      ],
      variants: [
        { name: 'small', weight: 300, weightType: 'variable', stickiness: 'userId' },
        { name: 'large', weight: 700, weightType: 'variable', stickiness: 'userId', payload: { type: 'json', value: '{"size":10}' } },
      ],
    });
    await on('default', 'rollout', env);
  }
  await create('default', 'disabled-strategy');
  await strategy('default', 'disabled-strategy', 'production', { name: 'default', disabled: true });
  await strategy('default', 'disabled-strategy', 'production', {
    name: 'default',
    constraints: [constraint('userId', 'IN', ['2'])],
  });
  await on('default', 'disabled-strategy', 'production');
  await create('default', 'off-toggle');

  // web: a custom strategy, operators, a segment, toggle variants, a dependency, tags.
  await create('web', 'checkout', { description: 'new checkout' });
  for (const env of ['development', 'production']) {
    await strategy('web', 'checkout', env, {
      name: 'flexibleRollout',
      parameters: { rollout: env === 'production' ? '50' : '100', stickiness: 'default', groupId: 'checkout' },
      segments: [segment.id],
    });
    await strategy('web', 'checkout', env, {
      name: 'byRegion',
      parameters: { regions: 'eu' },
      constraints: [
        constraint('region', 'IN', ['eu']),
        constraint('userId', 'STR_STARTS_WITH', ['9'], { caseInsensitive: true }),
      ],
    });
    await on('web', 'checkout', env);
    await call('PUT', `${features('web')}/checkout/environments/${env}/variants`, [
      { name: 'blue', weight: 500, weightType: 'variable', stickiness: 'default', overrides: [{ contextName: 'userId', values: ['4'] }] },
      { name: 'green', weight: 500, weightType: 'variable', stickiness: 'default', payload: { type: 'string', value: 'g' } },
    ]);
  }
  await create('web', 'checkout-banner');
  await strategy('web', 'checkout-banner', 'production', {
    name: 'default',
    constraints: [
      constraint('userId', 'NUM_GT', [], { value: '3' }),
      constraint('currentTime', 'DATE_AFTER', [], { value: '2020-01-01T00:00:00.000Z' }),
      constraint('appVersion', 'SEMVER_GT', [], { value: '1.2.0', inverted: true }),
      ...(at >= 705 ? [constraint('sessionId', 'REGEX', [], { value: '^s[0-9]+$' })] : []),
      constraint('userId', 'STR_CONTAINS', ['1', '2'], { inverted: true }),
    ],
  });
  await on('web', 'checkout-banner', 'production');
  if (at >= 505) {
    await call('POST', `${features('web')}/checkout-banner/dependencies`, {
      feature: 'checkout',
      enabled: true,
      variants: ['blue'],
    });
  }
  await call('POST', '/api/admin/features/checkout/tags', { type: 'team', value: 'payments' });
  await call('POST', '/api/admin/features/checkout/tags', { type: 'simple', value: 'web' });

  // mobile: a few plain toggles; one archived.
  for (let i = 0; i < 8; i += 1) {
    const name = `mobile-${i}`;
    await create('mobile', name);
    await strategy('mobile', name, 'production', {
      name: 'flexibleRollout',
      parameters: { rollout: String(i * 12), stickiness: 'default', groupId: name },
    });
    if (i % 2 === 0) await on('mobile', name, 'production');
  }
  await create('mobile', 'retired');
  await call('DELETE', `${features('mobile')}/retired`);

  const tokens = [];
  for (const body of [
    { tokenName: 'web-prod', type: 'backend', projects: ['web'], environment: 'production' },
    { tokenName: 'all-dev', type: 'client', projects: ['*'], environment: 'development' },
    { tokenName: 'two-prod', type: 'backend', projects: ['default', 'mobile'], environment: 'production' },
    { tokenName: 'legacy', type: 'client', projects: ['*'], environment: 'default' },
    { tokenName: 'browser', type: 'frontend', projects: ['*'], environment: 'development' },
  ]) {
    const kind = body.type === 'backend' && at < 702 ? 'client' : body.type;
    // 4.x names a token `username`.
    const named = at < 500 ? { username: body.tokenName } : {};
    const token = await call('POST', '/api/admin/api-tokens', { ...body, ...named, type: kind });
    tokens.push({ secret: token.secret, type: token.type, environment: token.environment, projects: token.projects });
  }
  await call('POST', '/api/admin/addons', {
    provider: 'webhook',
    enabled: true,
    description: 'audit log',
    parameters: { url: 'https://hooks.example.com/unleash', authorization: 'Bearer s3cret' },
    events: ['feature-created', 'feature-updated', 'feature-environment-enabled'],
  });
  process.stdout.write(`${JSON.stringify({ tokens })}\n`);
}

main().catch((error) => fail(error.stack || String(error)));
