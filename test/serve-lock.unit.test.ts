import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { holdServeLock, ServeLockError } from '../src/db/index.js';

describe('serve.lock, the one-serve-per-DATA_DIR lock (src/db/serve-lock.ts)', () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mothership-serve-lock-'));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('is private, leaves no journal, and refuses a second holder until the first releases it', () => {
    const dir = dataDir();
    const held = holdServeLock(dir);
    try {
      assert.equal(statSync(path.join(dir, 'serve.lock')).mode & 0o777, 0o600);
      assert.ok(!existsSync(path.join(dir, 'serve.lock-journal')));
      assert.throws(() => holdServeLock(dir), /Another mothership serve is running on DATA_DIR/);
    } finally {
      held.release();
    }
    holdServeLock(dir).release();
  });

  // Outside review: a damaged lock file was reported as a damaged database to restore from a backup.
  const unusable: [string, (file: string, dir: string) => void][] = [
    ['holds something else', (file) => writeFileSync(file, '1234\n')],
    ['is torn', (file) => writeFileSync(file, Buffer.alloc(4096, 7))],
    ['is a directory', (file) => mkdirSync(file)],
    // Second review: opening a FIFO waited for a reader, and serve never started.
    ['is a FIFO', (file) => execFileSync('mkfifo', [file])],
    [
      'is a hard link to the database',
      (file, dir) => {
        writeFileSync(path.join(dir, 'mothership.db'), 'the database');
        linkSync(path.join(dir, 'mothership.db'), file);
      },
    ],
  ];
  for (const [what, make] of unusable)
    it(`that ${what} is named in one sentence that says to remove it, not to restore the database`, () => {
      const dir = dataDir();
      const file = path.join(dir, 'serve.lock');
      make(file, dir);
      assert.throws(
        () => holdServeLock(dir),
        (error: unknown) =>
          error instanceof ServeLockError &&
          error.message.startsWith(`${file} cannot hold the lock of mothership serve (`) &&
          /remove it while no mothership serve runs/.test(error.message),
      );
    });

  it('that is a symbolic link is refused, not followed to the file it names', () => {
    const dir = dataDir();
    const database = path.join(dir, 'mothership.db');
    writeFileSync(database, 'the database');
    symlinkSync(database, path.join(dir, 'serve.lock'));
    assert.throws(() => holdServeLock(dir), ServeLockError);
    assert.equal(readFileSync(database, 'utf8'), 'the database');
  });
});
