import { LogController, type FastifyServerOptions } from 'fastify';
import { pino } from 'pino';

/** Fields that hold secrets. */
const SECRET_FIELDS = ['password', 'secret', 'shared_secret', 'token', 'ca_cert', 'client_cert', 'client_key', 'client_key_passphrase'];

/**
 * Secrets that must never reach a log line: the request headers that carry credentials, and the
 * secret fields at a line's top level and one object down (a path pino's redaction can match).
 */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-bot-signature"]',
  'res.headers["set-cookie"]',
  ...SECRET_FIELDS,
  ...SECRET_FIELDS.map((field) => `*.${field}`),
];

/**
 * The one logger setup of every process: secrets redacted; JSON for log collectors, or readable
 * lines (pino-pretty) for a person at a terminal.
 */
export function loggerOptions(
  level: string,
  format: 'auto' | 'json' | 'pretty' = 'json',
  terminal = Boolean(process.stdout.isTTY),
): FastifyServerOptions['logger'] {
  const pretty = format === 'pretty' || (format === 'auto' && terminal);
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' } } } : {}),
  };
}

const { chindingsSym, serializersSym, stringifiersSym } = pino.symbols;
/** Binding names pino's child leaves out, as they name its options. */
const PINO_OPTION_NAMES = new Set(['level', 'serializers', 'formatters', 'customLevels']);

/**
 * Each request's child logger, with the lines pino's own `child(bindings)` writes, made without the
 * redaction of its bindings: a redact path that starts with a wildcard (`*.password`) sends every
 * binding of every child through the redactor, a cost on every request for Fastify's request id,
 * which is never a secret. Text bindings that no serializer takes and no redact path names are
 * written as pino writes them, a JSON member each; anything else is left to pino.
 */
export const requestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) => {
  const entries = Object.entries(bindings);
  const own = logger as unknown as Record<symbol, Record<string, unknown> | undefined>;
  const plain = ([key, value]: [string, unknown]) =>
    typeof value === 'string' && !PINO_OPTION_NAMES.has(key) && !options.serializers?.[key] && !own[serializersSym]?.[key] && !own[stringifiersSym]?.[key];
  if (!entries.every(plain)) return logger.child(bindings, options);
  // No options: pino's quick way, which sets nothing but the bindings (Fastify passes `{}` for none).
  const child = logger.child({}, options.level || options.serializers ? options : undefined) as typeof logger & Record<symbol, string>;
  // A logger from another copy of pino keeps its bindings under another symbol.
  if (typeof child[chindingsSym] !== 'string') return logger.child(bindings, options);
  for (const [key, value] of entries) child[chindingsSym] += `,${JSON.stringify(key)}:${JSON.stringify(value)}`;
  return child;
};

/** The levels that log every request and response (docs/configuration.md). */
const ACCESS_LOG_LEVELS = new Set(['debug', 'trace']);

/**
 * Fastify's two lines per request (incoming, completed) are the access log of LOG_LEVEL=debug: at
 * info they are a cost on every request (bench/README.md), and a flood of requests would be a flood
 * of lines. Its other lines (a request that errored, a response stream that failed) are kept.
 */
export class AccessLogController extends LogController {
  private readonly accessLog: boolean;

  constructor(level: string) {
    super();
    this.accessLog = ACCESS_LOG_LEVELS.has(level);
  }

  override incomingRequest(...args: Parameters<LogController['incomingRequest']>): void {
    if (this.accessLog) super.incomingRequest(...args);
  }

  override requestCompleted(...args: Parameters<LogController['requestCompleted']>): void {
    if (this.accessLog || args[0]) super.requestCompleted(...args);
  }

  /** A client that went away mid-download is the access log's business; a stream that failed is not. */
  override streamError(...args: Parameters<LogController['streamError']>): void {
    if (this.accessLog || (args[0] as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE') super.streamError(...args);
  }
}
