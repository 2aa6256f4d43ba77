import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'pino';

/** Every shape pino's log methods take: an object or error first (then the message), or the message alone. */
type LogArgs = [objOrMessage: unknown, message?: string, ...args: unknown[]];

/**
 * Each request's logger (request.log): the pino child bound to the request id, made the first
 * time something logs through it. Fastify makes that child for every request, and most requests
 * log nothing through it (their access line goes through the server's logger with the id as a
 * field, the same line), so it is made only when needed.
 */
class RequestLogger implements FastifyBaseLogger {
  private made: FastifyBaseLogger | undefined;
  private readonly parent: FastifyBaseLogger;
  private readonly bindings: Bindings;
  private readonly options: ChildLoggerOptions;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.parent = parent;
    this.bindings = bindings;
    this.options = options;
  }

  private get logger(): FastifyBaseLogger {
    this.made ??= this.parent.child(this.bindings, this.options);
    return this.made;
  }

  get level(): string {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.logger.level = level;
  }

  // Methods on the prototype, not arrow fields: nothing is made per request but the object itself.
  fatal(...args: LogArgs): void { this.logger.fatal(...args); }
  error(...args: LogArgs): void { this.logger.error(...args); }
  warn(...args: LogArgs): void { this.logger.warn(...args); }
  info(...args: LogArgs): void { this.logger.info(...args); }
  debug(...args: LogArgs): void { this.logger.debug(...args); }
  trace(...args: LogArgs): void { this.logger.trace(...args); }
  silent(...args: LogArgs): void { this.logger.silent(...args); }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.logger.child(bindings, options);
  }
}

/** Fastify's childLoggerFactory: a RequestLogger in place of the child it would make at once. */
export const lazyRequestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = (logger, bindings, options) => new RequestLogger(logger, bindings, options);
