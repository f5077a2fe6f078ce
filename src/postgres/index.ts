/** `session-persistence-jsonl/postgres`: the PostgreSQL backend (docs/postgres.md). Needs `pg` 8. */
export { createPostgresPersistence, type PostgresSessionPersistence } from './postgres-persistence.js'
export { type PostgresConfig, PostgresConfigSchema } from './config.js'
export { SCHEMA_VERSION } from './migrations.js'
