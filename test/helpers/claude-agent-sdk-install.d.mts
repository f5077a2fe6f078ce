export declare const SDK_VERSION: string
export declare const SDK_DIR: string
export declare function ensureClaudeAgentSdk(options?: { log?: (line: string) => void }): Promise<{ entry: string } | { skipped: string }>
