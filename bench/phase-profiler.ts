/**
 * The gateway child's side of BENCH_PROFILE=1: a CPU profile per bench phase, taken in-process
 * through the inspector (exactly the phase, no clock matching between processes), started and
 * stopped when the bench parent says so. The inspector is loaded on the first profile only, so an
 * unprofiled run carries none of it.
 */
import { writeFileSync } from 'node:fs';
import type { Session } from 'node:inspector/promises';

/** Microseconds between samples: the interval the whole-run `--cpu-prof-interval=200` profile used. */
const SAMPLING_INTERVAL_US = 200;

export class PhaseProfiler {
  private session: Session | null = null;

  async start(): Promise<void> {
    if (!this.session) {
      const { Session } = await import('node:inspector/promises');
      this.session = new Session();
      this.session.connect();
      await this.session.post('Profiler.enable');
      await this.session.post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US });
    }
    await this.session.post('Profiler.start');
  }

  /** Stops the running profile and writes it as a .cpuprofile (what bench/profile-summary.ts reads). */
  async stop(file: string): Promise<void> {
    if (!this.session) throw new Error('no profile was started');
    const { profile } = await this.session.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
  }
}
