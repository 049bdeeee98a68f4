/** The data layer's entry point: the Database and the helpers other capabilities write and read with. */
export { Database, loadPg, now, sqliteFile, type Db } from './database.js';
export * from './schema.js';
export { isUnavailable, storageFailure, unlessStorageFails } from './errors.js';
export { claimInterval, getSetting, isStoredSetting, putSetting, settingFingerprint, storedSettingFingerprint } from './kv.js';
export { insertWithNewId, uniqueId } from './ids.js';
export { prepare, prepareColumn, type Param, type Prepared, type PreparedColumn, type PreparedValues } from './prepared.js';
export { PRUNE_CHUNK, pruneOldest, pruneOlderThan, deletionMark, reclaim, type LogTable } from './prune.js';
export { storageBytes } from './usage.js';
export { PollGate, type CommitMark } from './poll-gate.js';
export { outsideTransaction, TransactionMisuseError } from './transaction-scope.js';
export { SCHEMA_VERSION, UnknownSchemaError } from './schema-version.js';
export { holdServeLock, ServeLockError } from './serve-lock.js';
