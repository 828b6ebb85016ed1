// Drives the real frontend JS SDK (unleash-proxy-client) and OpenFeature's OFREP provider for
// Node (@openfeature/ofrep-provider on @openfeature/server-sdk) against a running Flagpole, for
// tests/it/frontend_sdks.rs. Pinned in package.json.
//
// Usage: node node_frontend.mjs BASE_URL FRONTEND_TOKEN APP_NAME
//
// Expects the toggles of tests/it/frontend_sdks.rs: `sdk.on` (on), `sdk.off` (off),
// `sdk.user` (on for userId u1 only) and `sdk.payload` (on, variant `blue` with the string
// payload `b`). Prints one JSON line with what each client answered; exits 1 on an SDK error.

import { UnleashClient, InMemoryStorageProvider } from 'unleash-proxy-client';
import { OpenFeature } from '@openfeature/server-sdk';
import { OFREPProvider } from '@openfeature/ofrep-provider';

const [base, token, appName] = process.argv.slice(2);
if (!base || !token || !appName) {
  process.stderr.write('usage: node node_frontend.mjs BASE_URL FRONTEND_TOKEN APP_NAME\n');
  process.exit(1);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const errors = [];

// The frontend SDK: polls GET /api/frontend every second, re-polls with If-None-Match,
// sends its metrics to /api/frontend/client/metrics.
const client = new UnleashClient({
  url: `${base}/api/frontend`,
  clientKey: token,
  appName,
  refreshInterval: 1,
  metricsInterval: 1,
  metricsIntervalInitial: 0,
  storageProvider: new InMemoryStorageProvider(),
  context: { userId: 'u2', properties: { plan: 'pro' } },
});
client.on('error', (e) => errors.push(`frontend sdk: ${JSON.stringify(e)}`));
await client.start();
const frontend = {
  on: client.isEnabled('sdk.on'),
  off: client.isEnabled('sdk.off'),
  userBefore: client.isEnabled('sdk.user'),
  variant: client.getVariant('sdk.payload'),
};
await client.updateContext({ userId: 'u1' });
frontend.userAfter = client.isEnabled('sdk.user');
// A few unchanged re-polls (304s), and metrics sent meanwhile.
await sleep(2500);
frontend.stillOn = client.isEnabled('sdk.on');
client.stop();

// OpenFeature through OFREP.
await OpenFeature.setProviderAndWait(
  new OFREPProvider({ baseUrl: base, headers: [['Authorization', `Bearer ${token}`]] }),
);
const of = OpenFeature.getClient();
const ofrep = {
  on: await of.getBooleanValue('sdk.on', false),
  off: await of.getBooleanValue('sdk.off', true),
  userU1: await of.getBooleanValue('sdk.user', false, { targetingKey: 'u1' }),
  userU2: await of.getBooleanValue('sdk.user', true, { targetingKey: 'u2' }),
  payload: await of.getStringValue('sdk.payload', 'default'),
  details: await of.getBooleanDetails('sdk.on', false),
  missing: await of.getBooleanDetails('sdk.missing', true),
};
await OpenFeature.close();

process.stdout.write(`${JSON.stringify({ frontend, ofrep, errors })}\n`);
process.exit(errors.length ? 1 : 0);
