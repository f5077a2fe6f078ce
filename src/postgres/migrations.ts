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
  // 2: events loses its foreign key. Its check ran once per inserted line (a look-up and a lock
  // of the session's row) and cost a third of the append throughput, while the append statement
  // already claims the session's row before it inserts a line. What the key's ON DELETE CASCADE
  // did, a trigger now does, once per deleted session instead of once per inserted line: any
  // deleter (this release, an older one still running, an operator's retention SQL) takes the
  // lines with the row. The trigger's DELETE takes a fresh snapshot after the row is locked, so
  // it also takes the lines of an append that committed while the delete waited for that lock.
  // Like the cascade it replaces, it runs with its owner's rights (a deleter needs no right on
  // events), on a fixed search_path. Nothing is dropped but the constraint. Both tables are
  // locked first, in the order every reader takes them (sessions, then events), so the
  // migration cannot deadlock with a load that holds one and wants the other.
  // (Revised before any release: no schema at version 2 exists without the trigger.)
  (s) => `
    LOCK TABLE "${s}".sessions, "${s}".events IN ACCESS EXCLUSIVE MODE;
    CREATE FUNCTION "${s}".delete_session_lines() RETURNS trigger LANGUAGE plpgsql
      SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      DELETE FROM "${s}".events WHERE session_id = OLD.session_id;
      RETURN NULL;
    END
    $body$;
    CREATE TRIGGER sessions_delete_lines AFTER DELETE ON "${s}".sessions
      FOR EACH ROW EXECUTE FUNCTION "${s}".delete_session_lines();
    ALTER TABLE "${s}".events DROP CONSTRAINT IF EXISTS events_session_id_fkey;
  `,
  // 3: events.kind says which of the types a load from the last compaction looks for a line
  // holds (event-kinds.ts: 1 turn/start, 2 turn/end, 3 request/header, 4 history/compact,
  // 5 history/rewind; 0 any other), and two partial indexes hold only those lines: a tail load
  // finds its start with a few index probes and a short walk back over compactions and rewinds
  // instead of reading the log. The append statements name the kind of every line they insert
  // (computed from the event when it is serialized). The column is added with DEFAULT 0, which
  // gives every existing row 0 without rewriting the table, then the default is dropped: an
  // insert that does not name the kind (an older release still running, an operator's SQL)
  // gets NULL, and the trigger computes it from the line then. The backfill parses only the
  // lines that can hold a marker type (its text, or a backslash that could escape it), through a
  // function that gives 0 for a line that is not JSON (damage is for a load to report, not for a
  // migration to fail on), and rewrites only the marker rows. Only events is locked: nothing
  // here touches sessions, so a load holding it cannot deadlock with the migration. Nothing is
  // dropped.
  (s) => `
    LOCK TABLE "${s}".events IN ACCESS EXCLUSIVE MODE;
    ALTER TABLE "${s}".events ADD COLUMN kind smallint DEFAULT 0;
    ALTER TABLE "${s}".events ALTER COLUMN kind DROP DEFAULT;
    CREATE FUNCTION "${s}".event_kind(line text) RETURNS smallint LANGUAGE plpgsql IMMUTABLE
      SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      t text;
    BEGIN
      BEGIN
        t := line::json ->> 'type';
      EXCEPTION WHEN others THEN
        RETURN 0;
      END;
      RETURN CASE t WHEN 'turn/start' THEN 1 WHEN 'turn/end' THEN 2 WHEN 'request/header' THEN 3
                    WHEN 'history/compact' THEN 4 WHEN 'history/rewind' THEN 5 ELSE 0 END;
    END
    $body$;
    CREATE FUNCTION "${s}".fill_event_kind() RETURNS trigger LANGUAGE plpgsql
      SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      NEW.kind := "${s}".event_kind(NEW.line);
      RETURN NEW;
    END
    $body$;
    CREATE TRIGGER events_fill_kind BEFORE INSERT ON "${s}".events
      FOR EACH ROW WHEN (NEW.kind IS NULL) EXECUTE FUNCTION "${s}".fill_event_kind();
    UPDATE "${s}".events SET kind = "${s}".event_kind(line)
     WHERE (strpos(line, 'turn/') > 0 OR strpos(line, 'request/header') > 0 OR strpos(line, 'history/') > 0
            OR strpos(line, E'\\\\') > 0)
       AND "${s}".event_kind(line) <> 0;
    CREATE INDEX events_markers ON "${s}".events (session_id, kind, seq) WHERE kind <> 0;
    CREATE INDEX events_history ON "${s}".events (session_id, seq) WHERE kind >= 4;
  `,
  // 4: sessions.incarnation tells a session row from the one of the same id that replaced it (a
  // session deleted and created again, with the same header or another): a watcher that saw one
  // incarnation ends when the row carries another (watch-session.ts). The column's default draws
  // from the writer_epochs sequence, so every insert gets a fresh value, whichever statement or
  // release (an older one still running, an operator's SQL) sends it. It is added without a
  // default, which gives the existing rows NULL without rewriting the table (a volatile default
  // would rewrite it), then the default is set, which touches no existing row. Only sessions is
  // locked; nothing is dropped.
  (s) => `
    LOCK TABLE "${s}".sessions IN ACCESS EXCLUSIVE MODE;
    ALTER TABLE "${s}".sessions ADD COLUMN incarnation bigint;
    ALTER TABLE "${s}".sessions ALTER COLUMN incarnation SET DEFAULT nextval('"${s}".writer_epochs');
  `,
]

/** The schema version this release writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length
