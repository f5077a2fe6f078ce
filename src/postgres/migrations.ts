/**
 * The schema's migrations, in order: migration `i` brings the schema to version `i + 1`. Each
 * runs in its own transaction. Append only: a released migration is never edited or removed,
 * and none may drop data.
 */
export const MIGRATIONS: readonly ((schema: string) => string)[] = [
  // 1: sessions (one row per stored log, its header line and its writer) and events (one row per
  // line). Every append updates its session's row: no index covers the columns it changes and
  // pages keep room (fillfactor 50), so those are HOT updates that touch no index.
  (s) => `
    CREATE SEQUENCE "${s}".writer_epochs;
    CREATE TABLE "${s}".sessions (
      session_id   text PRIMARY KEY,
      header_line  text NOT NULL,
      created_at   bigint NOT NULL,
      length       bigint NOT NULL,
      size_bytes   bigint NOT NULL,
      updated_at   timestamptz NOT NULL DEFAULT now(),
      writer_epoch bigint NOT NULL,
      holder_host  text,
      holder_pid   integer,
      holder_since timestamptz
    ) WITH (fillfactor = 50);
    CREATE INDEX sessions_listing ON "${s}".sessions (created_at DESC, session_id);
    CREATE TABLE "${s}".events (
      session_id text NOT NULL REFERENCES "${s}".sessions (session_id) ON DELETE CASCADE,
      seq        bigint NOT NULL,
      line       text NOT NULL,
      PRIMARY KEY (session_id, seq)
    );
  `,
  // 2: events loses its foreign key. Its check ran once per inserted line (a lookup and a lock
  // of the session's row) and cost a third of the append throughput, while the append statement
  // already claims the session's row before it inserts a line. Deleting a session now deletes its
  // lines itself (delete-session.ts). Nothing is dropped but the constraint.
  (s) => `
    ALTER TABLE "${s}".events DROP CONSTRAINT IF EXISTS events_session_id_fkey;
  `,
]

/** The schema version this release writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length
