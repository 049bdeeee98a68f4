/**
 * Commentary from a match replay. The built-in generator is deterministic and needs no network;
 * an OpenAI-compatible chat completions endpoint can be used instead (ENRICHMENT_LLM_URL).
 *
 * Replay format (docs/enrichment.md):
 *   { "title"?, "duration_seconds"?, "players": [{"id", "name", "team"?}],
 *     "events"?: [{"t", "type", "player"?, "target"?, "points"?, "text"?}],
 *     "final_score"?: {"<team or player id>": n}, "winner"? }
 */
export interface Replay {
  title?: string;
  duration_seconds?: number;
  players: { id: string; name: string; team?: string }[];
  events?: { t: number; type: string; player?: string; target?: string; points?: number; text?: string }[];
  final_score?: Record<string, number>;
  winner?: string;
}

export type CommentaryGenerator = (replay: unknown, matchId: string) => Promise<string>;

export class ReplayError extends Error {}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Checks the parts of the replay the generator relies on; throws a ReplayError naming the field. */
export function parseReplay(replay: unknown): Replay {
  if (!isObject(replay)) throw new ReplayError('the match has no replay document');
  const players = replay.players;
  if (!Array.isArray(players) || players.length === 0) throw new ReplayError('replay.players must be a non-empty array');
  players.forEach((player, index) => {
    if (!isObject(player) || typeof player.id !== 'string' || typeof player.name !== 'string') {
      throw new ReplayError(`replay.players[${index}] needs string "id" and "name"`);
    }
  });
  if (replay.events !== undefined) {
    if (!Array.isArray(replay.events)) throw new ReplayError('replay.events must be an array');
    replay.events.forEach((event, index) => {
      if (!isObject(event) || typeof event.t !== 'number' || typeof event.type !== 'string') throw new ReplayError(`replay.events[${index}] needs a numeric "t" and a string "type"`);
    });
  }
  if (replay.final_score !== undefined && (!isObject(replay.final_score) || !Object.values(replay.final_score).every((value) => typeof value === 'number'))) {
    throw new ReplayError('replay.final_score must map names to numbers');
  }
  return replay as unknown as Replay;
}

const clock = (seconds: number) => `${Math.floor(seconds / 60)}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
const list = (items: string[]) => (items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`);
const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
const MAX_MOMENTS = 10;

export function builtInCommentary(input: unknown, matchId: string): string {
  const replay = parseReplay(input);
  const names = new Map(replay.players.map((player) => [player.id, player.name]));
  const teamOf = new Map(replay.players.map((player) => [player.id, player.team]));
  const name = (id: string | undefined) => (id ? names.get(id) ?? id : 'someone');
  const paragraphs: string[] = [];

  const teams = [...new Set(replay.players.map((player) => player.team).filter((team): team is string => Boolean(team)))];
  const length = replay.duration_seconds ? ` over ${clock(replay.duration_seconds)}` : '';
  const lineup = teams.length
    ? teams.map((team) => `${team} (${list(replay.players.filter((player) => player.team === team).map((player) => player.name))})`).join(' against ')
    : list(replay.players.map((player) => player.name));
  paragraphs.push(`${replay.title ?? `Match ${matchId}`}: ${lineup}${length}.`);

  const events = [...(replay.events ?? [])].sort((a, b) => a.t - b.t);
  const score = new Map<string, number>();
  let leader: string | undefined;
  let anyScore = false;
  const moments: string[] = [];
  const points = new Map<string, number>();
  for (const event of events) {
    const actor = name(event.player);
    let line: string;
    switch (event.type) {
      case 'goal':
      case 'score':
        line = `${actor} scores${event.target ? ` past ${name(event.target)}` : ''}`;
        break;
      case 'kill':
        line = `${actor} takes down ${name(event.target)}`;
        break;
      case 'objective':
        line = `${actor} secures ${event.text ?? 'the objective'}`;
        break;
      default:
        line = event.text ? `${actor}: ${event.text}` : `${actor} (${event.type.replace(/_/g, ' ')})`;
    }
    if (event.points && event.player) {
      const side = teamOf.get(event.player) ?? event.player;
      score.set(side, (score.get(side) ?? 0) + event.points);
      points.set(event.player, (points.get(event.player) ?? 0) + event.points);
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

  const finalScore = replay.final_score ?? (score.size ? Object.fromEntries(score) : undefined);
  const sides = finalScore ? Object.entries(finalScore).sort((a, b) => b[1] - a[1]) : [];
  if (sides.length) {
    const line = sides.map(([side, value]) => `${names.get(side) ?? side} ${value}`).join(', ');
    const winner = replay.winner ? names.get(replay.winner) ?? replay.winner : sides.length > 1 && sides[0]![1] > sides[1]![1] ? names.get(sides[0]![0]) ?? sides[0]![0] : undefined;
    paragraphs.push(`Final score: ${line}. ${winner ? `${capitalize(winner)} takes it.` : 'Honours even.'}`);
  } else if (replay.winner) {
    paragraphs.push(`${capitalize(names.get(replay.winner) ?? replay.winner)} takes it.`);
  }
  const star = [...points.entries()].sort((a, b) => b[1] - a[1])[0];
  if (star && star[1] > 0) paragraphs.push(`Player of the match: ${name(star[0])}, with ${star[1]} point${star[1] === 1 ? '' : 's'}.`);
  return paragraphs.join('\n\n');
}

/** An OpenAI-compatible chat completions client (`/chat/completions` is appended unless the URL has it). */
export function llmCommentary(options: { url: string; model: string; apiKey: string | null; timeoutMs?: number }): CommentaryGenerator {
  const endpoint = options.url.replace(/\/+$/, '').endsWith('/chat/completions') ? options.url : `${options.url.replace(/\/+$/, '')}/chat/completions`;
  return async (input, matchId) => {
    const replay = parseReplay(input);
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}) },
      body: JSON.stringify({
        model: options.model,
        messages: [
          { role: 'system', content: 'You are a lively esports commentator. Write 2 to 4 short paragraphs of commentary on the match replay you are given. Use only facts from the replay.' },
          { role: 'user', content: `Match ${matchId} replay (JSON):\n${JSON.stringify(replay)}` },
        ],
        temperature: 0.7,
      }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
    });
    if (!response.ok) throw new Error(`LLM endpoint answered ${response.status}`);
    const body = (await response.json()) as { choices?: { message?: { content?: unknown } }[] };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string' || !content.trim()) throw new Error('LLM endpoint returned no commentary');
    return content.trim();
  };
}
