/** The part of madge's programmatic API the architecture test uses (madge ships no types). */
declare module 'madge' {
  interface MadgeResult {
    /** Each file (relative to the base directory) with the files it imports. */
    obj(): Record<string, string[]>;
    /** Every import cycle, as the files along it. */
    circular(): string[][];
  }
  interface MadgeConfig {
    fileExtensions?: string[];
    tsConfig?: string;
    detectiveOptions?: Record<string, unknown>;
  }
  export default function madge(path: string, config?: MadgeConfig): Promise<MadgeResult>;
}
