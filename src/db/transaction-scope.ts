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

/** Runs a transaction's work inside the scope; it closes when the work ends (timers started inside then run free). */
export async function inTransactionScope<T>(work: () => Promise<T>): Promise<T> {
  const marker = { open: true };
  try {
    return await scope.run(marker, work);
  } finally {
    marker.open = false;
  }
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
