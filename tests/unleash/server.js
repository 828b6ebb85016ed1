// Starts a real unleash-server for tests/it/migration: on PostgreSQL at PGHOST:PGPORT (database
// PGDATABASE, user PGUSER), listening on UNLEASH_PORT, with the admin token of
// INIT_ADMIN_API_TOKENS. The OSS build's RBAC filter lets only project `default` through;
// `ui.environment: "Pro"` lifts exactly that filter (MODERN-MODEL appendix).
// The unleash-server of the working directory (tests/unleash, tests/unleash-6, -5 or -4).
const unleash = require(require.resolve('unleash-server', { paths: [process.cwd()] }));

unleash
  .start({
    db: {
      host: process.env.PGHOST || '127.0.0.1',
      port: Number(process.env.PGPORT),
      user: process.env.PGUSER || 'postgres',
      password: process.env.PGPASSWORD || '',
      database: process.env.PGDATABASE || 'unleash',
      ssl: false,
    },
    server: { port: Number(process.env.UNLEASH_PORT), host: '127.0.0.1' },
    ui: { environment: 'Pro' },
    logLevel: 'warn',
  })
  .then(() => console.log('unleash started'))
  .catch((error) => {
    console.error(error);
    process.exit(1);
  });
