// Drives the real Node Unleash SDK (unleash-client, pinned in package.json) in streaming mode
// against a running Flagpole, for tests/it/streaming/sdks.rs.
//
// Usage: node node_streaming.js BASE_URL TOGGLE
//
// Connects to BASE_URL/api with `experimentalMode: {type: 'streaming'}` and polling set to an
// hour (so only the stream can bring changes), waits until TOGGLE is enabled, prints `ready`,
// then waits until the stream turns it off and prints one JSON line:
// {"sdk": "node", "disabledAfterMs": n, "warnings": [...]}. Exits 1 (reason on stderr) when
// either does not happen within 20 s.
'use strict';

const { Unleash, InMemStorageProvider } = require('unleash-client');

const DEADLINE_MS = 20000;

function fail(message) {
  process.stderr.write(`node_streaming: ${message}\n`);
  process.exit(1);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(what, check, deadline) {
  while (!check()) {
    if (Date.now() > deadline) {
      fail(`timed out waiting for ${what}`);
    }
    await sleep(10);
  }
}

async function main() {
  if (process.argv.length !== 4) {
    fail('usage: node node_streaming.js BASE_URL TOGGLE');
  }
  const base = process.argv[2].replace(/\/+$/, '');
  const toggle = process.argv[3];
  const warnings = [];
  const unleash = new Unleash({
    url: `${base}/api/`,
    appName: 'flagpole-streaming-test',
    refreshInterval: 3600000,
    disableMetrics: true,
    storageProvider: new InMemStorageProvider(),
    experimentalMode: { type: 'streaming' },
  });
  unleash.on('error', (e) => fail(`SDK error: ${e && e.message ? e.message : e}`));
  unleash.on('warn', (w) => warnings.push(String(w)));
  await waitFor(`${toggle} enabled`, () => unleash.isEnabled(toggle), Date.now() + DEADLINE_MS);
  process.stdout.write('ready\n');
  const started = Date.now();
  await waitFor(`${toggle} turned off`, () => !unleash.isEnabled(toggle), started + DEADLINE_MS);
  const disabledAfterMs = Date.now() - started;
  unleash.destroy();
  process.stdout.write(`${JSON.stringify({ sdk: 'node', disabledAfterMs, warnings })}\n`);
  process.exit(0);
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
