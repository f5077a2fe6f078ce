export declare const SDK_VERSION: string
export declare const SDK_DIR: string
export declare function ensureClaudeAgentSdk(): Promise<{ entry: string } | { skipped: string }>
