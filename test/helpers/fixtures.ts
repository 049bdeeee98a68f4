/** A small replay document in the format the commentary generator reads (docs/enrichment.md). */
export const REPLAY = {
  title: 'Ranked match #42',
  duration_seconds: 612,
  players: [
    { id: 'p1', name: 'Nova', team: 'red' },
    { id: 'p2', name: 'Blaze', team: 'blue' },
  ],
  events: [
    { t: 35, type: 'goal', player: 'p1', points: 1 },
    { t: 210, type: 'goal', player: 'p2', points: 1 },
    { t: 400, type: 'kill', player: 'p2', target: 'p1' },
    { t: 590, type: 'goal', player: 'p2', points: 1 },
  ],
  final_score: { red: 1, blue: 2 },
  winner: 'blue',
};
