import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';

type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/**
 * A request's logger that becomes a real child logger (with the request id bound) only when
 * something is logged. Fastify asks for a child on every request; building one runs the
 * redaction over its bindings, a cost a request that logs nothing (nearly all of them) should not pay.
 */
export class RequestLogger implements FastifyBaseLogger {
  private real: FastifyBaseLogger | null = null;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private logger(): FastifyBaseLogger {
    return (this.real ??= this.parent.child(this.bindings, this.options));
  }

  private write(level: LogLevel, args: unknown[]): void {
    const logger = this.logger();
    (logger[level] as (...args: unknown[]) => void).apply(logger, args);
  }

  get level(): FastifyBaseLogger['level'] {
    return this.real?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: FastifyBaseLogger['level']) {
    this.logger().level = level;
  }

  // Prototype methods, not arrow fields: nothing is allocated per request but this object.
  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(...args: unknown[]): void {
    this.write('silent', args);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger().child(bindings, options);
  }
}

/** Fastify's `childLoggerFactory`: a lazy child per request. */
export function lazyRequestLogger(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLogger(parent, bindings, options);
}
