/** Where a command writes: standard output and standard error in main.ts, a buffer in tests. */
export type Output = { out: (line: string) => void; err: (line: string) => void };
