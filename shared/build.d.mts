// Types of shared/build.mjs (plain JavaScript: it runs before anything is compiled).
export declare const REPO_ROOT: string;
export declare const BUILD_DIR: string;
export declare const COMPILED: boolean;
export declare const CODE_ROOT: string;
export declare function builtPath(rel: string): string;
export declare function staleness(): string | undefined;
export declare function assertFresh(): void;
export declare function build(opts?: { quiet?: boolean }): Promise<{ built: boolean; ms: number }>;
