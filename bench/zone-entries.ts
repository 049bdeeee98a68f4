import type autocannon from 'autocannon';

/**
 * What the load generator sends for the ingest benchmark (plain data, so it crosses to the
 * generator's process): zone entries of `persons`, each entering the zone it is not in, so every
 * request is a real move (a zone.exit and a zone.entry, the person's row written).
 */
export interface ZonePlan {
  persons: string[];
  zones: [string, string];
  token: string;
  /** The number of the first request; a person's entries alternate between the zones from there. */
  first: number;
}

/**
 * Consecutive requests are for different persons, so writers rarely wait for one person's row lock;
 * with at least as many persons as writers in flight, each person's entries arrive in turn.
 */
export function zoneEntries({ persons, zones, token, first }: ZonePlan) {
  let counter = first;
  return {
    method: 'POST' as const,
    path: '/api/events',
    setupRequest: (request: autocannon.Request) => {
      const index = counter++;
      const round = Math.floor(index / persons.length);
      const body = JSON.stringify({ type: 'zone.entry', person: persons[index % persons.length], zone: zones[round % 2] });
      return { ...request, body, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } };
    },
  };
}
