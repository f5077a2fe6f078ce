import type { Db } from './db.js'

/** Removes a session's row and, through the foreign key, its lines; durable at COMMIT. True when a row went. */
export async function deleteSession(db: Db, schema: string, id: string): Promise<boolean> {
  const result = await db.query(`DELETE FROM "${schema}".sessions WHERE session_id = $1`, [id])
  return result.rowCount === 1
}

/** Whether a session is stored. */
export async function sessionExists(db: Db, schema: string, id: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM "${schema}".sessions WHERE session_id = $1`, [id])
  return rows.length === 1
}
