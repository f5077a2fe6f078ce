/** Whether the PostgreSQL tests must run here (CI): then a missing server fails them instead of skipping. */
export function pgRequired(): boolean {
  return process.env.CI === 'true' || process.env.SPJ_PG_REQUIRED === '1'
}
