/**
 * One timer per period for the whole process: every poll of the same period runs on the same tick,
 * so an idle service wakes once a second instead of once per poller and second (each wake-up of an
 * idle process costs about as much as the polls themselves; bench/README.md, idle). A task's first
 * run therefore comes within one period of `onEvery`, not exactly one period later.
 */
const clocks = new Map<number, { timer: NodeJS.Timeout; tasks: Set<() => void> }>();

/** Runs `task` every `ms` on the period's shared tick; returns the stop. `task` must not throw. */
export function onEvery(ms: number, task: () => void): () => void {
  let clock = clocks.get(ms);
  if (!clock) {
    const tasks = new Set<() => void>();
    // Over a copy: a task one of them starts on this tick first runs on the next one.
    clock = { timer: setInterval(() => [...tasks].forEach((run) => run()), ms).unref(), tasks };
    clocks.set(ms, clock);
  }
  // A Set keeps one entry per function: the same function registered twice would stop both at once.
  const entry = () => task();
  clock.tasks.add(entry);
  const { timer, tasks } = clock;
  return () => {
    tasks.delete(entry);
    if (tasks.size === 0 && clocks.get(ms)?.timer === timer) {
      clearInterval(timer);
      clocks.delete(ms);
    }
  };
}

/** A task polled on a shared tick: `run` starts it now unless it runs; `stop` ends the ticks and waits for a run in progress. */
export interface Poller {
  run(): void;
  stop(): Promise<void>;
}

/**
 * Runs `task` every `ms` (on the period's shared tick), never twice at once: a tick that comes while
 * a run goes on is skipped, so a slow run cannot pile up behind itself. `task` must not reject.
 */
export function pollEvery(ms: number, task: () => Promise<unknown>): Poller {
  let running: Promise<unknown> | null = null;
  const run = () => void (running ??= task().finally(() => (running = null)));
  const stopTicks = onEvery(ms, run);
  return {
    run,
    async stop() {
      stopTicks();
      await running;
    },
  };
}

/** Resolves on the next tick of the `ms` clock (within `ms`), or at once when `wake` is called. */
export function untilNextTick(ms: number): { done: Promise<void>; wake: () => void } {
  let wake!: () => void;
  const done = new Promise<void>((resolve) => {
    const stop = onEvery(ms, () => wake());
    wake = () => {
      stop();
      resolve();
    };
  });
  return { done, wake };
}
