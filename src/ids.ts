/**
 * The one id rule: persons, zones, bots, matches and the installation (MOTHERSHIP_ID) are named by
 * ids that are safe as MQTT topic levels, entity ids and path segments. The route schemas use the
 * source (`idString` in http/schemas.ts), everything else the RegExp.
 */
export const ID_PATTERN_SOURCE = '^[a-z0-9][a-z0-9_-]{0,63}$';
export const ID_PATTERN = new RegExp(ID_PATTERN_SOURCE);

/** Letters that Unicode decomposition leaves whole, spelt as their languages spell them in ASCII. */
const TRANSLITERATIONS: Record<string, string> = {
  ß: 'ss',
  ẞ: 'ss',
  æ: 'ae',
  Æ: 'ae',
  œ: 'oe',
  Œ: 'oe',
  ø: 'o',
  Ø: 'o',
  đ: 'd',
  Đ: 'd',
  ð: 'd',
  Ð: 'd',
  þ: 'th',
  Þ: 'th',
  ł: 'l',
  Ł: 'l',
  ı: 'i',
};
const TRANSLITERATED = new RegExp(`[${Object.keys(TRANSLITERATIONS).join('')}]`, 'g');

/** Derives an id from a display name (`fallback` when nothing of it is left); at most 56 characters, so suffixes like `-2` still fit the rule. */
export function slugify(name: string, fallback: string): string {
  const slug = name
    .replace(TRANSLITERATED, (letter) => TRANSLITERATIONS[letter]!)
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, 56)
    .replace(/[-_]+$/g, '');
  return slug || fallback;
}
