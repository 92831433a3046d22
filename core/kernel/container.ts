import 'reflect-metadata';
import { container as rootContainer, instanceCachingFactory, type DependencyContainer } from 'tsyringe';

/**
 * Typed wrapper around tsyringe. Tokens carry their type, so `resolve(KeyStore)` is typed without
 * decorator metadata (tsx/esbuild do not emit it). Every binding is a singleton within its container.
 */
export interface Token<T> {
  readonly key: symbol;
  readonly name: string;
  /** Phantom field: only the type system reads it. */
  readonly __type?: T;
}

export function createToken<T>(name: string): Token<T> {
  return { key: Symbol(name), name };
}

export class Container {
  private constructor(private readonly inner: DependencyContainer) {}

  static create(): Container {
    return new Container(rootContainer.createChildContainer());
  }

  bindValue<T>(token: Token<T>, value: T): void {
    // A factory rather than tsyringe's useValue, which takes null as "no provider" (a token may be typed `X | null`).
    this.inner.register(token.key, { useFactory: () => value });
  }

  /** Lazily built singleton; the factory may resolve other tokens. */
  bindFactory<T>(token: Token<T>, factory: (container: Container) => T): void {
    this.inner.register(token.key, { useFactory: instanceCachingFactory(() => factory(this)) });
  }

  has(token: Token<unknown>): boolean {
    return this.inner.isRegistered(token.key, true);
  }

  resolve<T>(token: Token<T>): T {
    if (!this.has(token)) throw new Error(`Nothing is bound to ${token.name} in the container`);
    return this.inner.resolve<T>(token.key);
  }
}
