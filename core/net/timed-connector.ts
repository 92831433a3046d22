import type { LookupFunction, Socket } from 'node:net';
import { buildConnector, errors } from 'undici';

/**
 * undici's own connect timeout runs on a coarse (~0.5 s) timer wheel, too blunt for the short
 * connect deadlines that let failover move on quickly, so the deadline is kept here with a plain
 * timer around undici's connector (whose own timeout is switched off). Both HTTP clients dial
 * through it: the provider client's and the one for customers' URLs (outbound-http-client.ts).
 */
export function timedConnector(connectMs: number, lookup: LookupFunction | undefined): buildConnector.connector {
  const connect = buildConnector({ timeout: 0, ...(lookup ? { lookup } : {}) });
  return (options, callback) => {
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      const error = new errors.ConnectTimeoutError(`Connect timeout after ${connectMs} ms (${options.hostname}:${options.port})`);
      socket?.destroy(error);
      callback(error, null);
    }, connectMs);
    const socket = (connect as unknown as (o: typeof options, cb: buildConnector.Callback) => Socket | undefined)(options, (...args) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      callback(...args);
    });
  };
}
