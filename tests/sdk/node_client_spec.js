// Evaluates the @unleash/client-specification cases with the real Node Unleash SDK
// (unleash-client, pinned in package.json), for tests/it/client_spec.
//
// Usage: node node_client_spec.js < INPUT
//
// INPUT (JSON on standard input) lists the specification files, each served at its own URL:
//
//   {"files": [{"id": FILE, "url": API_URL, "authorization": HEADER|null,
//               "cases": [{"kind": "enabled"|"variant", "toggle": NAME, "context": {...}}]}]}
//
// For each file in turn, a fresh client (in-memory backup store, so nothing carries over from
// one file to the next; no metrics) polls API_URL, and once it has fetched, every case is
// evaluated with isEnabled(toggle, context) or getVariant(toggle, context), the context passed
// as the file writes it. Prints one JSON line:
//
//   {"sdk": "node", "files": [{"id": FILE, "error": WHY (only when the file failed as a whole),
//     "results": [{"enabled": bool} | {"variant": {...}} | {"error": WHY}, ...]}]}
//
// Comparing is the caller's job. Exits 1 with the reason on stderr on bad input, or after 50 s
// in all; a file whose document does not arrive within 10 s is reported as failed.
'use strict';

const fs = require('node:fs');

const DEADLINE_MS = 50000;
const FETCH_DEADLINE_MS = 10000;

function fail(message) {
  process.stderr.write(`node_client_spec: ${message}\n`, () => process.exit(1));
  // Should the write never complete, the exit must still happen.
  setTimeout(() => process.exit(1), 1000).unref();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const describe = (err) => (err && err.stack ? err.stack : String(err));

async function runFile(file) {
  const { Unleash, InMemStorageProvider, UnleashEvents } = require('unleash-client');
  const errors = [];
  const unleash = new Unleash({
    // The SDK resolves './client/features' against the URL: it must end with a slash.
    url: file.url.endsWith('/') ? file.url : `${file.url}/`,
    appName: 'flagpole-client-spec',
    instanceId: `node-client-spec-${file.id}`,
    // One fetch is all a file needs; the client is destroyed long before a second.
    refreshInterval: 60000,
    timeout: 5000,
    disableMetrics: true,
    storageProvider: new InMemStorageProvider(),
    skipInstanceCountWarning: true,
    customHeaders: file.authorization ? { Authorization: file.authorization } : {},
  });
  unleash.on(UnleashEvents.Error, (err) => errors.push(describe(err)));
  // Warnings (e.g. for unknown toggles, which some cases ask for) are not errors.
  unleash.on(UnleashEvents.Warn, () => {});
  try {
    const deadline = Date.now() + FETCH_DEADLINE_MS;
    while (!unleash.isSynchronized()) {
      if (Date.now() > deadline) {
        return { id: file.id, error: `no fetch within ${FETCH_DEADLINE_MS} ms; errors: ${JSON.stringify(errors)}` };
      }
      await sleep(20);
    }
    const results = file.cases.map((c) => {
      try {
        if (c.kind === 'variant') {
          return { variant: unleash.getVariant(c.toggle, c.context || {}) };
        }
        return { enabled: unleash.isEnabled(c.toggle, c.context || {}) };
      } catch (err) {
        return { error: describe(err) };
      }
    });
    return { id: file.id, results };
  } finally {
    unleash.destroy();
  }
}

async function main() {
  setTimeout(() => fail(`gave up after ${DEADLINE_MS / 1000} s`), DEADLINE_MS).unref();
  let input;
  try {
    input = JSON.parse(fs.readFileSync(0, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read the input: ${err.message}`);
  }
  if (!input || !Array.isArray(input.files)) {
    throw new Error('the input must be {"files": [...]}');
  }
  const files = [];
  // One file at a time: the clients must not share anything, including the event loop's
  // attention while a file is evaluated.
  for (const file of input.files) {
    files.push(await runFile(file));
  }
  process.stdout.write(`${JSON.stringify({ sdk: 'node', files })}\n`, () => process.exit(0));
}

main().catch((err) => fail(err && err.message ? err.message : String(err)));
