import { AsyncLocalStorage } from 'node:async_hooks';
import type { Dialect, Driver } from 'kysely';

/**
 * Marks the code a transaction runs (and everything it awaits), so that a query or a transaction
 * that would escape it fails at once instead of going wrong quietly. On SQLite the one connection
 * is held by the running transaction: a query through `database.db`, or a nested transaction,
 * would wait for it forever, and every later write with it. On PostgreSQL the same code runs on a
 * second connection, outside the transaction it was meant to be part of. Both are the same bug.
 */
const scope = new AsyncLocalStorage<{ open: boolean }>();

export class TransactionMisuseError extends Error {
  override name = 'TransactionMisuseError';
}

/**
 * While an AsyncLocalStorage is enabled, Node 20 runs a hook for every promise the process creates:
 * a share of a refused request's cost (bench/README.md). The scope is enabled while a transaction runs
 * (`run` enables it) and disabled once none has been open for a turn of the event loop, so requests
 * that open no transaction (refusals, reads) do not pay for it, and the transactions of one group
 * commit do not switch it off and on between them. A store left on an old resource is a closed marker.
 */
let openScopes = 0;
let disableScheduled = false;

function closeScope(): void {
  if (--openScopes > 0 || disableScheduled) return;
  disableScheduled = true;
  setImmediate(() => {
    disableScheduled = false;
    if (openScopes === 0) scope.disable();
  });
}

/** Runs a transaction's work inside the scope; it closes when the work ends (timers started inside then run free). */
export async function inTransactionScope<T>(work: () => Promise<T>): Promise<T> {
  const marker = { open: true };
  openScopes++;
  try {
    return await scope.run(marker, work);
  } finally {
    marker.open = false;
    closeScope();
  }
}

/**
 * Runs `work`, and everything it starts, outside any transaction's scope: for a background task that
 * a transaction's code kicks off and that must not count as part of it (it queries on its own).
 */
export function outsideTransaction<T>(work: () => T): T {
  return scope.exit(work);
}

export function assertOutsideTransaction(what: string): void {
  if (scope.getStore()?.open) {
    throw new TransactionMisuseError(`${what} inside a transaction: use the transaction's handle (trx) for every query and emit events through it`);
  }
}

/** A dialect whose driver refuses to hand out a connection from inside a transaction's work. */
export function guardedDialect(inner: Dialect): Dialect {
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property !== 'createDriver') return Reflect.get(target, property, receiver);
      return () => {
        const driver = target.createDriver();
        return new Proxy(driver, {
          get(driverTarget, driverProperty) {
            const value = Reflect.get(driverTarget, driverProperty) as unknown;
            if (driverProperty === 'acquireConnection') {
              return () => {
                assertOutsideTransaction('A query through database.db');
                return driverTarget.acquireConnection();
              };
            }
            return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(driverTarget) : value;
          },
        }) satisfies Driver;
      };
    },
  });
}
