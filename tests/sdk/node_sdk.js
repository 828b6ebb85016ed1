// Drives the real Node Unleash SDK (unleash-client, pinned in package.json) against a running
// Flagpole, for tests/it/sdks.rs.
//
// Usage: node node_sdk.js BASE_URL APP_NAME
//
// Expects the toggles `sdk.on` (enabled, default strategy), `sdk.off` (disabled) and
// `sdk.variants` (enabled, variants `blue` and `green`). Connects to BASE_URL/api with 1 s
// refresh and metrics intervals and an in-memory backup store, waits for the toggles, evaluates
// them, checks the answers, waits until the server has acknowledged (2xx) metrics covering every
// evaluation, stops the client with a final flush and prints one JSON line:
//
//   {"sdk": "node", "appName", "instanceId", "sdkVersion", "strategies": [registered names],
//    "registered": true, "metricsSent": n, "sentToggles": {name: {yes, no, variants}},
//    "toggles": {"sdk.on": {"yes", "no"}, "sdk.off": {...}, "sdk.variants": {"yes", "no", "variants": {}}}}
//
// Exits 1 (with the reason on stderr) when an answer is wrong or the server does not take the
// registration or the metrics within the deadline.
'use strict';

const { Unleash, InMemStorageProvider, UnleashEvents } = require('unleash-client');

const ON = 'sdk.on';
const OFF = 'sdk.off';
const VARIANTS = 'sdk.variants';
const N_ON = 7;
const N_OFF = 5;
const N_VARIANTS = 9;
const VARIANT_NAMES = new Set(['blue', 'green']);
const DEADLINE_MS = 30000;

function fail(message) {
  process.stderr.write(`node_sdk: ${message}\n`);
  process.exit(1);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what, check, deadline) {
  while (!check()) {
    if (Date.now() > deadline) {
      fail(`timed out waiting for ${what}`);
    }
    await sleep(50);
  }
}

async function main() {
  if (process.argv.length !== 4) {
    fail('usage: node node_sdk.js BASE_URL APP_NAME');
  }
  const base = process.argv[2].replace(/\/+$/, '');
  const appName = process.argv[3];
  const deadline = Date.now() + DEADLINE_MS;
  const instanceId = `${appName}-node-${process.pid}`;

  const unleash = new Unleash({
    url: `${base}/api/`,
    appName,
    instanceId,
    refreshInterval: 1000,
    metricsInterval: 1000,
    timeout: 5000,
    // No backup file: toggles come from the server only.
    storageProvider: new InMemStorageProvider(),
    skipInstanceCountWarning: true,
  });

  const warnings = [];
  let registration = null;
  let metricsSent = 0;
  const sent = {};
  unleash.on(UnleashEvents.Error, (err) => fail(`SDK error: ${err && err.stack ? err.stack : err}`));
  unleash.on(UnleashEvents.Warn, (msg) => warnings.push(String(msg)));
  unleash.on(UnleashEvents.Registered, (payload) => {
    registration = payload;
  });
  unleash.on(UnleashEvents.Sent, (payload) => {
    metricsSent += 1;
    const toggles = (payload.bucket && payload.bucket.toggles) || {};
    for (const [name, counts] of Object.entries(toggles)) {
      const total = (sent[name] = sent[name] || { yes: 0, no: 0, variants: {} });
      total.yes += counts.yes || 0;
      total.no += counts.no || 0;
      for (const [variant, n] of Object.entries(counts.variants || {})) {
        total.variants[variant] = (total.variants[variant] || 0) + n;
      }
    }
  });

  await waitFor(
    'the toggles',
    () =>
      unleash.isSynchronized() &&
      [ON, OFF, VARIANTS].every((name) => unleash.getFeatureToggleDefinition(name)),
    deadline,
  );

  const expected = {
    [ON]: { yes: N_ON, no: 0 },
    [OFF]: { yes: 0, no: N_OFF },
    [VARIANTS]: { yes: N_VARIANTS, no: 0, variants: {} },
  };
  for (let i = 0; i < N_ON; i++) {
    if (unleash.isEnabled(ON) !== true) fail(`${ON} evaluated to off`);
  }
  for (let i = 0; i < N_OFF; i++) {
    if (unleash.isEnabled(OFF) !== false) fail(`${OFF} evaluated to on`);
  }
  for (let i = 0; i < N_VARIANTS; i++) {
    const variant = unleash.getVariant(VARIANTS, { userId: `user-${i}` });
    if (!variant.enabled || !VARIANT_NAMES.has(variant.name) || variant.feature_enabled === false) {
      fail(`${VARIANTS} gave the variant ${JSON.stringify(variant)}`);
    }
    const counts = expected[VARIANTS].variants;
    counts[variant.name] = (counts[variant.name] || 0) + 1;
  }

  await waitFor(
    `metrics covering every evaluation to be accepted (warnings: ${JSON.stringify(warnings)})`,
    () =>
      Object.entries(expected).every(
        ([name, want]) =>
          sent[name] && sent[name].yes >= want.yes && sent[name].no >= want.no,
      ),
    deadline,
  );
  await waitFor(`the registration to be accepted (warnings: ${JSON.stringify(warnings)})`, () => registration !== null, deadline);
  await unleash.destroyWithFlush();

  for (const [name, want] of Object.entries(expected)) {
    const got = sent[name] || {};
    if (got.yes !== want.yes || got.no !== want.no) {
      fail(`sent ${JSON.stringify(got)} for ${name}, evaluated ${JSON.stringify(want)}`);
    }
  }
  process.stdout.write(
    `${JSON.stringify({
      sdk: 'node',
      appName,
      instanceId,
      sdkVersion: registration.sdkVersion,
      strategies: registration.strategies,
      registered: true,
      metricsSent,
      sentToggles: sent,
      toggles: expected,
    })}\n`,
    () => process.exit(0),
  );
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
