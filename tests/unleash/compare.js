// Evaluates every toggle for many contexts with the real Node SDK (unleash-client, from
// FLAGPOLE_SDK_NODE_DIR) against Unleash and against Flagpole with the same token, for
// tests/it/migration.rs.
//
// Usage: node compare.js UNLEASH_URL FLAGPOLE_URL TOKEN CONTEXTS
// Prints one JSON line: {toggles, contexts, evaluations, enabled, differences: [first 20]}.
'use strict';

const path = require('path');

const sdk = require(path.join(process.env.FLAGPOLE_SDK_NODE_DIR, 'node_modules', 'unleash-client'));

function fail(message) {
  process.stderr.write(`compare: ${message}\n`);
  process.exit(1);
}

function start(url, token, name) {
  const client = new sdk.Unleash({
    url: `${url}/api/`,
    appName: 'migration-test',
    instanceId: name,
    customHeaders: { Authorization: token },
    refreshInterval: 60000,
    disableMetrics: true,
    storageProvider: new sdk.InMemStorageProvider(),
  });
  return new Promise((resolve) => {
    client.on('error', (e) => fail(`${name}: ${e.message || e}`));
    client.once('synchronized', () => resolve(client));
  });
}

const REGIONS = ['eu', 'us', 'asia'];
const VERSIONS = ['1.0.0', '1.3.0', '2.0.0'];

async function main() {
  const [unleashUrl, flagpoleUrl, token, count] = process.argv.slice(2);
  const timer = setTimeout(() => fail('no document within 30 s'), 30000);
  const [theirs, ours] = await Promise.all([
    start(unleashUrl, token, 'unleash'),
    start(flagpoleUrl, token, 'flagpole'),
  ]);
  clearTimeout(timer);
  const names = new Set();
  for (const client of [theirs, ours]) {
    for (const toggle of client.getFeatureToggleDefinitions()) names.add(toggle.name);
  }
  const differences = [];
  let evaluations = 0;
  let enabled = 0;
  for (let i = 0; i < Number(count); i += 1) {
    const context = {
      userId: String(i % 50),
      sessionId: `s${i}`,
      remoteAddress: `10.0.0.${i % 3}`,
      appName: i % 7 === 0 ? 'legacy-app' : 'shop',
      properties: { region: REGIONS[i % 3], appVersion: VERSIONS[i % 3] },
    };
    for (const name of names) {
      const a = { on: theirs.isEnabled(name, context), variant: theirs.getVariant(name, context) };
      const b = { on: ours.isEnabled(name, context), variant: ours.getVariant(name, context) };
      evaluations += 1;
      if (a.on) enabled += 1;
      if (JSON.stringify(a) !== JSON.stringify(b) && differences.length < 20) {
        differences.push({ name, context, unleash: a, flagpole: b });
      }
    }
  }
  theirs.destroy();
  ours.destroy();
  process.stdout.write(
    `${JSON.stringify({ toggles: names.size, contexts: Number(count), evaluations, enabled, differences })}\n`,
  );
}

main().catch((error) => fail(error.stack || String(error)));
