// The capture SDK: DebugSession and everything around it. Usable on its own:
// it imports nothing from the gateway (only schemas/trace).
export { DebugSession, withDebugSession, rollupCosts, trajectoryFingerprint, LOG_FILE_LIMIT } from './session.ts';
export type { DebugSessionOptions, StepInput, BranchFromOptions, OrchestratorOptions, StreamOptions, BranchMode } from './session.ts';
export { CAPTURE_MODES, captures, compareCaptureModes, isCaptureMode, resolveCaptureMode } from './capture.ts';
export { RedactionPolicy, MASK, DEFAULT_REDACTORS } from './redaction.ts';
export type { Redactor, Dropper, RedactionPolicyOptions } from './redaction.ts';
export { FileStore, ObjectStore, atomicWriteFile, checkRelpath, commitStagedDir, writeBytes } from './store.ts';
export { recoverStagedBundle, stagedBundles, type RecoverStagedOptions, type RecoverStagedResult } from './recover.ts';
export type { Store, StoreWriter, StagedStore, ObjectStoreOptions } from './store.ts';
export { validateBundle, isPng } from './validate.ts';
export type { BundleIssue } from './validate.ts';
export { BundleContext, RuleResult, RulesEngine, rule, loadPack, BUILTIN_RULES, uncategorizedFailure, domGroundedTarget } from './diagnostics.ts';
export type { Rule, Severity } from './diagnostics.ts';
export { ModelApiAdapterBase } from './adapter.ts';
export type { Adapter, ActionOverrideCoords, ToolCall } from './adapter.ts';
export { parseDsn, parseRetryAfter, type DroppedRecord } from './stream.ts';
export { reconcileBundle, LEDGER_FILE, type ReconcileOptions, type ReconcileResult } from './reconcile.ts';
export { SDK_VERSION, ValueError, RuntimeError, shortId, sha256Hex } from './util.ts';
export type { SdkLogger } from './util.ts';
export type * from '../schemas/trace/types.gen.ts';
