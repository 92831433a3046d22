/**
 * Preloaded into a gateway child by bench/stream-cost.ts (`--import`) when it profiles: starts and
 * stops V8's CPU profiler when the parent says so over IPC, so the profile holds the measured
 * calls alone, not the start-up (`--cpu-prof` records the whole life of the process).
 *
 *   { type: 'profile-start', intervalUs }  → starts sampling
 *   { type: 'profile-stop', file }         → writes the .cpuprofile there, answers { type: 'profiled', file }
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

type ProfilerMessage = { type: 'profile-start'; intervalUs: number } | { type: 'profile-stop'; file: string };

const session = new Session();
session.connect();

function post<T>(method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as T)));
  });
}

process.on('message', (message: ProfilerMessage) => {
  if (message?.type === 'profile-start') {
    void (async () => {
      await post('Profiler.enable');
      await post('Profiler.setSamplingInterval', { interval: message.intervalUs });
      await post('Profiler.start');
      process.send?.({ type: 'profiling' });
    })();
  } else if (message?.type === 'profile-stop') {
    void (async () => {
      const { profile } = await post<{ profile: unknown }>('Profiler.stop');
      writeFileSync(message.file, JSON.stringify(profile));
      process.send?.({ type: 'profiled', file: message.file });
    })();
  }
});
