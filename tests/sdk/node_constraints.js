// Evaluates strategy-constraint cases with the real Node Unleash SDK (unleash-client, pinned in
// package.json) against a running Flagpole, for tests/it/constraint_sdks.rs.
//
// Usage: node node_constraints.js BASE_URL [CASES_FILE | -]
//
// CASES_FILE (or standard input when it is `-` or missing) holds a JSON list of cases:
//
//   [{"toggle": NAME, "context": {"userId", "environment", "currentTime", "properties": {}},
//     "expected": true|false (optional)}, ...]
//
// Connects to BASE_URL/api (in-memory backup store, no metrics), waits until the SDK has fetched
// every toggle the cases name, evaluates each case with `isEnabled(toggle, context)` and prints
// one JSON line:
//
//   {"sdk": "node", "answers": [bool per case, in order],
//    "mismatches": [toggle names whose answer differs from "expected"]}
//
// It only reports: comparing is the caller's job ("mismatches" is there for runs by hand). Exits
// 1 with the reason on stderr on bad input, when the toggles do not arrive, or after 30 s in all.
'use strict';

const fs = require('node:fs');

const DEADLINE_MS = 30000;
// Waiting for the toggles ends first, so that its failure names the missing ones.
const FETCH_DEADLINE_MS = 25000;

function fail(message) {
  process.stderr.write(`node_constraints: ${message}\n`, () => process.exit(1));
  // Should the write never complete, the exit must still happen.
  setTimeout(() => process.exit(1), 1000).unref();
}

function readCases(source) {
  let cases;
  try {
    const text = source === undefined || source === '-' ? fs.readFileSync(0, 'utf8') : fs.readFileSync(source, 'utf8');
    cases = JSON.parse(text);
  } catch (err) {
    throw new Error(`cannot read the cases: ${err.message}`);
  }
  if (!Array.isArray(cases) || cases.length === 0) {
    throw new Error('the cases must be a non-empty JSON list');
  }
  cases.forEach((c, i) => {
    if (c === null || typeof c !== 'object' || typeof c.toggle !== 'string') {
      throw new Error(`case ${i} has no toggle name: ${JSON.stringify(c)}`);
    }
    if (c.context !== undefined && (c.context === null || typeof c.context !== 'object')) {
      throw new Error(`case ${i} has a context that is not an object: ${JSON.stringify(c)}`);
    }
    if (c.expected !== undefined && typeof c.expected !== 'boolean') {
      throw new Error(`case ${i} has an expected answer that is not a boolean: ${JSON.stringify(c)}`);
    }
  });
  return cases;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  if (process.argv.length < 3 || process.argv.length > 4) {
    throw new Error('usage: node node_constraints.js BASE_URL [CASES_FILE | -]');
  }
  const base = process.argv[2].replace(/\/+$/, '');
  const cases = readCases(process.argv[3]);
  const fetchDeadline = Date.now() + FETCH_DEADLINE_MS;
  // Whatever hangs, the run ends after DEADLINE_MS.
  setTimeout(() => fail(`gave up after ${DEADLINE_MS / 1000} s`), DEADLINE_MS).unref();

  const { Unleash, InMemStorageProvider, UnleashEvents } = require('unleash-client');
  const unleash = new Unleash({
    url: `${base}/api/`,
    appName: 'flagpole-constraint-cases',
    instanceId: `node-constraints-${process.pid}`,
    refreshInterval: 1000,
    timeout: 5000,
    disableMetrics: true,
    // No backup file: toggles come from the server only.
    storageProvider: new InMemStorageProvider(),
    skipInstanceCountWarning: true,
  });
  const warnings = [];
  unleash.on(UnleashEvents.Error, (err) => fail(`SDK error: ${err && err.stack ? err.stack : err}`));
  unleash.on(UnleashEvents.Warn, (msg) => warnings.push(String(msg)));

  const wanted = [...new Set(cases.map((c) => c.toggle))];
  const missing = () => wanted.filter((name) => !unleash.getFeatureToggleDefinition(name));
  while (!unleash.isSynchronized() || missing().length > 0) {
    if (Date.now() > fetchDeadline) {
      throw new Error(
        `timed out waiting for the toggles; missing ${JSON.stringify(missing())} (warnings: ${JSON.stringify(warnings)})`,
      );
    }
    await sleep(50);
  }

  const answers = cases.map((c) => {
    // The fallback only answers for a toggle the SDK does not know, which must not happen.
    const answer = unleash.isEnabled(c.toggle, c.context || {}, () => {
      throw new Error(`the SDK does not know the toggle ${c.toggle}`);
    });
    if (typeof answer !== 'boolean') {
      throw new Error(`${c.toggle} evaluated to ${JSON.stringify(answer)}`);
    }
    return answer;
  });
  unleash.destroy();

  const mismatches = cases
    .filter((c, i) => c.expected !== undefined && c.expected !== answers[i])
    .map((c) => c.toggle);
  process.stdout.write(`${JSON.stringify({ sdk: 'node', answers, mismatches })}\n`, () => process.exit(0));
}

main().catch((err) => fail(err && err.message ? err.message : String(err)));
