// Evidence of a qualification run: one entry per assertion (passed or failed, how long, what was seen), written
// as results.json and SUMMARY.md into the run's directory, like the reference runner's evidence.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Evidence {
  readonly name: string;
  readonly outcome: 'passed' | 'failed';
  readonly ms: number;
  readonly details: Record<string, unknown>;
  readonly error?: string;
}

export class EvidenceLog {
  readonly entries: Evidence[] = [];
  readonly startedAt = new Date();

  /** Runs one assertion, recording its outcome and whatever it chose to note; rethrows a failure. */
  async step(name: string, body: (note: (key: string, value: unknown) => void) => Promise<void>): Promise<void> {
    const details: Record<string, unknown> = {};
    const started = performance.now();
    try {
      await body((key, value) => {
        details[key] = value;
      });
      this.entries.push({ name, outcome: 'passed', ms: Math.round(performance.now() - started), details });
    } catch (error) {
      this.entries.push({
        name,
        outcome: 'failed',
        ms: Math.round(performance.now() - started),
        details,
        error: (error as Error).message.slice(0, 2000),
      });
      throw error;
    }
  }

  write(dir: string, extra: Record<string, unknown>): void {
    const passed = this.entries.filter((e) => e.outcome === 'passed').length;
    const document = {
      started_at: this.startedAt.toISOString(),
      finished_at: new Date().toISOString(),
      passed,
      failed: this.entries.length - passed,
      ...extra,
      assertions: this.entries,
    };
    writeFileSync(join(dir, 'results.json'), `${JSON.stringify(document, null, 2)}\n`);
    const lines = [
      '# Local grid qualification',
      '',
      `${passed} of ${this.entries.length} assertions passed (${document.started_at} to ${document.finished_at}).`,
      '',
      ...Object.entries(extra).map(([k, v]) => `- ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`),
      '',
      '| assertion | outcome | ms | details |',
      '|---|---|---|---|',
      ...this.entries.map(
        (e) =>
          `| ${e.name} | ${e.outcome} | ${e.ms} | ${(e.error ?? JSON.stringify(e.details)).replace(/\|/g, '\\|').replace(/\n/g, ' ').slice(0, 400)} |`,
      ),
      '',
    ];
    writeFileSync(join(dir, 'SUMMARY.md'), lines.join('\n'));
  }
}
