/**
 * The one id rule: persons, zones, bots, matches and the installation (MOTHERSHIP_ID) are named by
 * ids that are safe as MQTT topic levels, entity ids and path segments. The route schemas use the
 * source (`idString` in http/schemas.ts), everything else the RegExp.
 */
export const ID_PATTERN_SOURCE = '^[a-z0-9][a-z0-9_-]{0,63}$';
export const ID_PATTERN = new RegExp(ID_PATTERN_SOURCE);

/** Derives an id from a display name (`fallback` when nothing of it is left); at most 56 characters, so suffixes like `-2` still fit the rule. */
export function slugify(name: string, fallback: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, 56)
    .replace(/[-_]+$/g, '');
  return slug || fallback;
}
