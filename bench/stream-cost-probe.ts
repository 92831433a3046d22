/**
 * Preloaded into every measured child by bench/stream-cost.ts (`--import`): answers the process's
 * CPU time to the microsecond (all threads: /proc counts only in 10 ms ticks), and starts and
 * stops V8's CPU profiler, or its sampling heap profiler, when the parent says so over IPC, so a
 * profile holds the measured calls alone, not the start-up (`--cpu-prof` records the whole life of
 * the process).
 *
 *   { type: 'cpu-usage' }                            → answers { type: 'cpu-usage', micros }
 *   { type: 'probe-profile-start', kind, interval }  → starts sampling (cpu: every `interval` µs;
 *                                                      allocations: every `interval` bytes, garbage included;
 *                                                      promoted: only what outlived a scavenge, whether or not
 *                                                      a full collection has freed it since)
 *   { type: 'probe-profile-stop', file }             → writes the profile there, answers { type: 'profiled', file }
 *
 * Not `profile-start`/`profile-stop`: bench/gateway-process.ts answers those with a CPU profile of
 * its own (BENCH_PROFILE), which would run beside this one and be written over its file.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

type ProbeMessage = { type: 'cpu-usage' } | { type: 'probe-profile-start'; kind: 'cpu' | 'allocations' | 'promoted'; interval: number } | { type: 'probe-profile-stop'; file: string };

let running: 'cpu' | 'allocations' | 'promoted' | null = null;

const session = new Session();
session.connect();

function post<T>(method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as T)));
  });
}

process.on('message', (message: ProbeMessage) => {
  if (message?.type === 'cpu-usage') {
    const { user, system } = process.cpuUsage();
    process.send?.({ type: 'cpu-usage', micros: user + system });
  } else if (message?.type === 'probe-profile-start') {
    void (async () => {
      running = message.kind;
      if (message.kind === 'cpu') {
        await post('Profiler.enable');
        await post('Profiler.setSamplingInterval', { interval: message.interval });
        await post('Profiler.start');
      } else {
        // Garbage too: what a call allocates and drops is what the scavenger is kept busy by. `promoted`
        // leaves out what died young: what is left was copied by scavenges and then marked by full collections.
        const includeObjectsCollectedByMinorGC = message.kind === 'allocations';
        const options = { samplingInterval: message.interval, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC };
        await post('HeapProfiler.startSampling', options);
      }
      process.send?.({ type: 'profiling' });
    })();
  } else if (message?.type === 'probe-profile-stop') {
    void (async () => {
      const { profile } = await post<{ profile: unknown }>(running === 'cpu' ? 'Profiler.stop' : 'HeapProfiler.stopSampling');
      writeFileSync(message.file, JSON.stringify(profile));
      process.send?.({ type: 'profiled', file: message.file });
    })();
  }
});
