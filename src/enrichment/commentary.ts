import { LLM_RESPONSE_LIMIT } from '../limits.js';

/**
 * Commentary from a match replay. The built-in generator is deterministic and needs no network;
 * an OpenAI-compatible chat completions endpoint can be used instead (ENRICHMENT_LLM_URL).
 *
 * Replay format (docs/enrichment.md), in the shapes games commonly export:
 *   { "title"?, "duration_seconds"?,
 *     "players": ["<id>", ...] or [{"id"?, "name"?, "team"?}] (an id or a name; numbers are read as text),
 *     "events"?: [{"t", "type", "player"?, "target"?, "points"?, "text"?}],
 *     "final_score"?: {"<team or player id>": n} or [{"team" | "player" | "id" | "name", "score" | "points"}],
 *     "winner"? }
 */
export interface Player {
  id: string;
  name: string;
  team?: string;
}

export interface ReplayEvent {
  t: number;
  type: string;
  player?: string;
  target?: string;
  points?: number;
  text?: string;
}

export interface Replay {
  title?: string;
  duration_seconds?: number;
  players: Player[];
  events: ReplayEvent[];
  final_score?: Record<string, number>;
  winner?: string;
}

export type CommentaryGenerator = (replay: unknown, matchId: string) => Promise<string>;

/** A replay the generator cannot read; `path` is a JSON Pointer into the replay document. */
export class ReplayError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`replay${path.replaceAll('/', '.')} ${reason}`.replace(/\.(\d+)/g, '[$1]'));
  }

  /** The field in the match document, as a JSON Pointer (`/replay/events/0/t`). */
  get field(): string {
    return `/replay${this.path}`;
  }
}

/** A replay's rule: throws a ReplayError naming the field it cannot read. */
export type Rule = (replay: unknown) => void;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isText = (value: unknown): value is string | number =>
  (typeof value === 'string' && value.trim() !== '') || (typeof value === 'number' && Number.isFinite(value));
const text = (value: unknown): string | undefined => (isText(value) ? String(value) : undefined);

function readPlayer(raw: unknown, index: number): Player {
  if (isText(raw)) return { id: String(raw), name: String(raw) };
  if (!isObject(raw)) throw new ReplayError(`/players/${index}`, 'must be an id or an object with "id" or "name"');
  const id = text(raw.id) ?? text(raw.name);
  if (id === undefined) throw new ReplayError(`/players/${index}`, 'needs an "id" or a "name"');
  const team = text(raw.team);
  return { id, name: text(raw.name) ?? id, ...(team === undefined ? {} : { team }) };
}

/** Bounds that keep the commentary readable and its size sane: a match is hours, not centuries. */
const REPLAY_LIMITS = { players: 1000, events: 10_000, seconds: 1_000_000, points: 1_000_000 } as const;

function readEvent(raw: unknown, index: number): ReplayEvent {
  if (!isObject(raw) || typeof raw.t !== 'number' || !Number.isFinite(raw.t) || typeof raw.type !== 'string') {
    throw new ReplayError(`/events/${index}`, 'needs a numeric "t" and a string "type"');
  }
  if (raw.t < 0 || raw.t > REPLAY_LIMITS.seconds) throw new ReplayError(`/events/${index}/t`, `must be 0 to ${REPLAY_LIMITS.seconds} seconds`);
  if (raw.points !== undefined && (typeof raw.points !== 'number' || !(Math.abs(raw.points) <= REPLAY_LIMITS.points))) {
    throw new ReplayError(`/events/${index}/points`, `must be a number from -${REPLAY_LIMITS.points} to ${REPLAY_LIMITS.points}`);
  }
  const event: ReplayEvent = { t: raw.t, type: raw.type };
  const player = text(raw.player);
  const target = text(raw.target);
  if (player !== undefined) event.player = player;
  if (target !== undefined) event.target = target;
  if (raw.points !== undefined) event.points = raw.points as number;
  if (typeof raw.text === 'string') event.text = raw.text;
  return event;
}

/** `{"red": 2}` or `[{"team": "red", "score": 2}]` (a side named by team, player, id or name; score or points). */
function readFinalScore(raw: unknown): Record<string, number> {
  const entries: [string, unknown][] = Array.isArray(raw)
    ? raw.map((entry, index) => {
        const side = isObject(entry) ? (text(entry.team) ?? text(entry.player) ?? text(entry.id) ?? text(entry.name)) : undefined;
        if (side === undefined) throw new ReplayError(`/final_score/${index}`, 'needs a "team", "player", "id" or "name"');
        return [side, isObject(entry) ? (entry.score ?? entry.points) : undefined];
      })
    : isObject(raw)
      ? Object.entries(raw)
      : [];
  if (!Array.isArray(raw) && !isObject(raw)) throw new ReplayError('/final_score', 'must map sides to numbers');
  for (const [side, value] of entries) {
    if (typeof value !== 'number' || !(Math.abs(value) <= REPLAY_LIMITS.points))
      throw new ReplayError(`/final_score/${side.replaceAll('~', '~0').replaceAll('/', '~1')}`, 'must be a number');
  }
  return Object.fromEntries(entries) as Record<string, number>;
}

/** Reads the replay into the one shape the generator works on; throws a ReplayError naming the field. */
export function parseReplay(input: unknown): Replay {
  if (!isObject(input)) throw new ReplayError('', 'must be a JSON object (the match has no replay document)');
  if (!Array.isArray(input.players) || input.players.length === 0) throw new ReplayError('/players', 'must be a non-empty array');
  if (input.players.length > REPLAY_LIMITS.players) throw new ReplayError('/players', `must list at most ${REPLAY_LIMITS.players} players`);
  if (Array.isArray(input.events) && input.events.length > REPLAY_LIMITS.events)
    throw new ReplayError('/events', `must list at most ${REPLAY_LIMITS.events} events`);
  const players = input.players.map(readPlayer);
  if (input.events !== undefined && !Array.isArray(input.events)) throw new ReplayError('/events', 'must be an array');
  const replay: Replay = { players, events: ((input.events as unknown[] | undefined) ?? []).map(readEvent) };
  if (typeof input.title === 'string') replay.title = input.title;
  if (typeof input.duration_seconds === 'number' && input.duration_seconds >= 0 && input.duration_seconds <= REPLAY_LIMITS.seconds)
    replay.duration_seconds = input.duration_seconds;
  if (input.final_score !== undefined) replay.final_score = readFinalScore(input.final_score);
  const winner = text(input.winner);
  if (winner !== undefined) replay.winner = winner;
  return replay;
}

/** What the LLM generator needs: some replay document; its shape is the model's business. */
const requireReplay: Rule = (replay) => {
  if (replay === null || replay === undefined) throw new ReplayError('', 'is missing (the match has no replay document)');
};

/**
 * Why the worker would refuse a replay (the error naming the field), or null when it can write
 * commentary from it: the one rule of the match write, the enrichment request (refused before it
 * costs quota) and the worker.
 */
export function replayRefusal(rule: Rule, replay: unknown): ReplayError | null {
  try {
    rule(replay);
    return null;
  } catch (error) {
    if (error instanceof ReplayError) return error;
    throw error;
  }
}

const clock = (seconds: number) => `${Math.floor(seconds / 60)}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
const list = (items: string[]) => (items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);
const capitalize = (value: string) => value.charAt(0).toUpperCase() + value.slice(1);
const MAX_MOMENTS = 10;

/** A goal or score with no points counts one: games often export goals without them. */
const pointsOf = (event: ReplayEvent) => event.points ?? (event.type === 'goal' || event.type === 'score' ? 1 : 0);

/** The single highest entry, or undefined when nothing is above zero or the top is shared. */
function soleTop(entries: [string, number][]): [string, number] | undefined {
  const ranked = [...entries].sort((a, b) => b[1] - a[1]);
  const [top, second] = ranked;
  return top && top[1] > 0 && (!second || second[1] < top[1]) ? top : undefined;
}

/** What happened in one event, told with `actor` (the event's player, named) as the subject. */
function momentOf(event: ReplayEvent, actor: string, name: (id: string | undefined) => string): string {
  switch (event.type) {
    case 'goal':
    case 'score':
      return `${actor} scores${event.target ? ` past ${name(event.target)}` : ''}`;
    case 'kill':
      return `${actor} takes down ${name(event.target)}`;
    case 'objective':
      return `${actor} secures ${event.text ?? 'the objective'}`;
    default:
      return event.text ? `${actor}: ${event.text}` : `${actor} (${event.type.replace(/_/g, ' ')})`;
  }
}

export function builtInCommentary(input: unknown, matchId: string): string {
  const replay = parseReplay(input);
  const names = new Map(replay.players.map((player) => [player.id, player.name]));
  const name = (id: string | undefined) => (id ? (names.get(id) ?? id) : 'someone');
  // A side is a team where players have one, otherwise the player alone.
  const sideOf = (id: string) => replay.players.find((player) => player.id === id)?.team ?? id;
  const sides = [...new Set(replay.players.map((player) => player.team ?? player.id))];
  const paragraphs: string[] = [];

  const teams = [...new Set(replay.players.map((player) => player.team).filter((team): team is string => Boolean(team)))];
  const length = replay.duration_seconds ? ` over ${clock(replay.duration_seconds)}` : '';
  const lineup = teams.length
    ? teams.map((team) => `${team} (${list(replay.players.filter((player) => player.team === team).map((player) => player.name))})`).join(' against ')
    : list(replay.players.map((player) => player.name));
  paragraphs.push(`${replay.title ?? `Match ${matchId}`}: ${lineup}${length}.`);

  const score = new Map<string, number>();
  const points = new Map<string, number>();
  let leader: string | undefined;
  let anyScore = false;
  const moments: string[] = [];
  for (const event of [...replay.events].sort((a, b) => a.t - b.t)) {
    const actor = name(event.player);
    let line = momentOf(event, actor, name);
    const gained = pointsOf(event);
    if (gained && event.player) {
      const side = sideOf(event.player);
      score.set(side, (score.get(side) ?? 0) + gained);
      points.set(event.player, (points.get(event.player) ?? 0) + gained);
      const ranked = [...score.entries()].sort((a, b) => b[1] - a[1]);
      const top = ranked[0]!;
      const tied = ranked.length > 1 && ranked[1]![1] === top[1];
      const leadingSide = top[0] === event.player ? actor : top[0];
      if (!tied && top[0] !== leader) {
        line += anyScore ? ` and ${leadingSide} takes the lead` : `, opening the scoring for ${leadingSide}`;
        leader = top[0];
      } else if (tied) {
        line += ', levelling it';
        leader = undefined;
      }
      anyScore = true;
    }
    moments.push(`At ${clock(event.t)}, ${line}.`);
  }
  if (moments.length) {
    const shown = moments.length > MAX_MOMENTS ? [...moments.slice(0, MAX_MOMENTS - 1), `... and ${moments.length - MAX_MOMENTS + 1} more moments.`] : moments;
    paragraphs.push(shown.join(' '));
  }

  // The final score: the replay's own, else the events' tally. A side it leaves out scored nothing
  // (a 2-0 is often exported as {"red": 2}), so a one-sided result is never "honours even".
  const finalScore = new Map(Object.entries(replay.final_score ?? (anyScore ? Object.fromEntries(score) : {})));
  if (finalScore.size && [...finalScore.keys()].every((side) => sides.includes(side)))
    for (const side of sides) if (!finalScore.has(side)) finalScore.set(side, 0);
  // The game's declared winner wins over the arithmetic; otherwise the side strictly ahead.
  const winner = replay.winner ?? soleTop([...finalScore.entries()])?.[0];
  if (finalScore.size) {
    const line = [...finalScore.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([side, value]) => `${name(side)} ${value}`)
      .join(', ');
    paragraphs.push(`Final score: ${line}. ${winner ? `${capitalize(name(winner))} takes it.` : 'Honours even.'}`);
  } else if (winner) {
    paragraphs.push(`${capitalize(name(winner))} takes it.`);
  }

  // The player of the match comes from the winning side (any side in a draw).
  const onWinningSide = (id: string) => !winner || id === winner || names.get(id) === winner || sideOf(id) === winner;
  const star = soleTop([...points.entries()].filter(([id]) => onWinningSide(id)));
  if (star) paragraphs.push(`Player of the match: ${name(star[0])}, with ${star[1]} point${star[1] === 1 ? '' : 's'}.`);
  return paragraphs.join('\n\n');
}

/** The response body as text; an answer over `limit` bytes fails without being read further. */
async function boundedText(response: Response, limit: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    // Leaving the loop cancels the stream: the rest is never read.
    if (size > limit) throw new Error(`LLM endpoint answered more than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** An OpenAI-compatible chat completions client (`/chat/completions` is appended unless the URL has it). */
export function llmCommentary(options: { url: string; model: string; apiKey: string | null; timeoutMs?: number }): CommentaryGenerator {
  const endpoint = options.url.replace(/\/+$/, '').endsWith('/chat/completions') ? options.url : `${options.url.replace(/\/+$/, '')}/chat/completions`;
  return async (replay, matchId) => {
    // Any replay document goes to the model as it is: the built-in generator's shape is not its rule.
    requireReplay(replay);
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
      body: JSON.stringify({
        model: options.model,
        messages: [
          {
            role: 'system',
            content:
              'You are a lively esports commentator. Write 2 to 4 short paragraphs of commentary on the match replay you are given. Use only facts from the replay.',
          },
          { role: 'user', content: `Match ${matchId} replay (JSON):\n${JSON.stringify(replay)}` },
        ],
        temperature: 0.7,
      }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
    });
    if (!response.ok) throw new Error(`LLM endpoint answered ${response.status}`);
    const body = JSON.parse(await boundedText(response, LLM_RESPONSE_LIMIT)) as { choices?: { message?: { content?: unknown } }[] };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string' || !content.trim()) throw new Error('LLM endpoint returned no commentary');
    return content.trim();
  };
}

/** A generator with the rule its replays must pass (`replayRefusal`). */
export interface Commentary {
  rule: Rule;
  generate: CommentaryGenerator;
}

/** The configured generator: the built-in one, or the LLM endpoint's when one is set. */
export function commentaryFor(llm: Parameters<typeof llmCommentary>[0] | null): Commentary {
  return llm
    ? { rule: requireReplay, generate: llmCommentary(llm) }
    : { rule: parseReplay, generate: async (replay, matchId) => builtInCommentary(replay, matchId) };
}
