import { type Config, ConfigError } from '../config.js';
import { SecretBox } from '../crypto.js';
import { Database, getSetting, putSetting } from '../db/index.js';

const KEY_CHECK = 'installation.key_check';
const INSTALLATION_ID = 'installation.id';
const KEY_CHECK_TEXT = 'mothership';

/**
 * Opens the configured database as this installation's, for the server and every command that
 * reads it: the database and the box that opens its secrets, once checkInstallation has passed (the
 * database is closed again when it fails), with its warnings for the caller to report. Only the
 * server (`serving`) records its MOTHERSHIP_ID: a command run from a shell without the service's
 * variable has another id, and must neither record it nor call the live one left over.
 */
export async function openInstallation(config: Config, { serving = false } = {}): Promise<{ database: Database; box: SecretBox; warnings: string[] }> {
  const database = await Database.open(config);
  const box = new SecretBox(config.secretsKey);
  try {
    return { database, box, warnings: await checkInstallation(database, box, serving ? config.mothershipId : null) };
  } catch (error) {
    await database.close();
    throw error;
  }
}

/**
 * Checks, before anything reads a secret, that this process belongs to the installation whose
 * database it opened. A SECRETS_KEY that cannot open the secrets sealed in the database (a second
 * instance with its own DATA_DIR) would answer every signed request with a 500: refuse to start
 * instead, saying what to do. A different MOTHERSHIP_ID is legitimate (it was just set explicitly)
 * but moves every Home Assistant entity: returned as a warning for the caller to log.
 */
export async function checkInstallation(database: Database, box: SecretBox, mothershipId: string | null): Promise<string[]> {
  const opens = (sealed: string) => {
    try {
      box.open(sealed);
      return true;
    } catch {
      return false;
    }
  };
  const keyCheck = await getSetting<string>(database.db, KEY_CHECK);
  // An installation from before the check: any sealed secret it already holds must open with this key.
  const sealed = keyCheck ?? (await database.db.selectFrom('bots').select('secret_encrypted').limit(1).executeTakeFirst())?.secret_encrypted;
  if (sealed !== undefined && !opens(sealed)) {
    throw new ConfigError(
      "SECRETS_KEY does not match the key this database's secrets were sealed with (another instance, or an earlier DATA_DIR, created them). " +
        'Give every instance on this database the same SECRETS_KEY: the base64 key in DATA_DIR/secrets-key of the instance that created them. ' +
        'See docs/operations.md, "Several instances".',
    );
  }
  if (keyCheck === undefined) await database.write((db) => putSetting(db, KEY_CHECK, box.seal(KEY_CHECK_TEXT)));

  const warnings: string[] = [];
  if (mothershipId === null) return warnings;
  /** Records `value` under `key`; a different value recorded before is `warning(previous)`. */
  const remember = async (key: string, value: string, warning: (previous: string) => string) => {
    const previous = await getSetting<string>(database.db, key);
    if (previous === value) return;
    if (previous !== undefined) warnings.push(warning(previous));
    await database.write((db) => putSetting(db, key, value));
  };
  await remember(
    INSTALLATION_ID,
    mothershipId,
    (previous) =>
      `MOTHERSHIP_ID is "${mothershipId}" but this database was last used as installation "${previous}": Home Assistant sees a new device. ` +
      `Clear the old one with \`mothership mqtt cleanup --installation ${previous}\`; several instances on one database must share MOTHERSHIP_ID.`,
  );
  return warnings;
}

/** The MOTHERSHIP_ID the server last ran as on this database: its entities are the live ones. */
export const servedInstallation = (database: Database): Promise<string | undefined> => getSetting<string>(database.db, INSTALLATION_ID);
