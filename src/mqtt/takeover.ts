/**
 * Another client connecting with the installation's client id (an older release without MQTT
 * ownership, still running during an upgrade). The broker hands the client id to whoever connected
 * last and closes the other's connection; with MQTT 3.1.1 that is only a closed socket. So the sign
 * is the pattern: connections the broker closes soon after accepting them, several in a row, with
 * every attempt between them accepted (a broker restarting refuses some). Two
 * clients that both reconnect at once would take the id from each other for ever, each takeover an
 * `offline` (the Last Will) and an `online` for Home Assistant; the one that notices backs off.
 */
export interface TakeoverPolicy {
  /** A connection the broker closes sooner than this after accepting it was cut short. */
  sessionMs: number;
  /** The reconnect delay while the client id is contested. */
  backoffMs: number;
}

/** Connections cut short in a row that make the client id contested. */
export const CUT_SHORT_IN_A_ROW = 3;

export interface TakeoverState {
  /** Connections the broker closed soon after accepting them, since the last one that held. */
  cutShort: number;
  contested: boolean;
}

export const UNCONTESTED: TakeoverState = { cutShort: 0, contested: false };

/** A connection the broker closed (not we) after `lastedMs`. */
export function connectionClosed(state: TakeoverState, lastedMs: number, policy: TakeoverPolicy): TakeoverState {
  if (lastedMs >= policy.sessionMs) return UNCONTESTED;
  const cutShort = state.cutShort + 1;
  return { cutShort, contested: state.contested || cutShort >= CUT_SHORT_IN_A_ROW };
}

/**
 * A connection attempt failed: the broker was away (a restart, an outage), not taken by another
 * client, whose takeovers find it up at every attempt. The row starts again; a contested id stays so.
 */
export function attemptFailed(state: TakeoverState): TakeoverState {
  return state.contested ? state : UNCONTESTED;
}

/** The delay before the next attempt: the long one while the client id is contested. */
export function reconnectDelay(state: TakeoverState, usual: number, policy: TakeoverPolicy): number {
  return state.contested ? Math.max(usual, policy.backoffMs) : usual;
}

/** What the status and the log say while the client id is contested. */
export function contestedReason(clientId: string, policy: TakeoverPolicy): string {
  return (
    `another client keeps connecting with this installation's client id (${clientId}): the broker closed ` +
    `${CUT_SHORT_IN_A_ROW} connections in a row within ${seconds(policy.sessionMs)} of accepting them. ` +
    `Is an older release still running (see Upgrading in docs/operations.md)? Trying again every ` +
    `${seconds(policy.backoffMs)} instead of taking the client id back`
  );
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;
