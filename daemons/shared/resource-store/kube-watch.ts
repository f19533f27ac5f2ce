// One list+watch loop against the API server (what client-go calls a reflector): list, stream changes from
// the list's resourceVersion, resume from the last seen one after a clean close, relist after 410 Gone,
// reconnect with jittered backoff after errors, and relist periodically (resync) to repair anything missed.

import { Backoff, sleep, WATCH_BACKOFF, type BackoffPolicy } from './backoff.ts';
import { ResourceStoreError } from './errors.ts';
import { failure, type KubeHttp, resourcePath } from './kube-http.ts';
import { ObjectCache } from './object-cache.ts';
import type { KubeObject, ResourceKind, WatchOptions, WatchRestartReason, WatchSubscription } from './types.ts';
import { LineSplitter, translateWatchLine } from './watch-lines.ts';

export interface KubeWatchTuning {
  /** Period of the full relist that repairs a view that missed events. */
  readonly resyncIntervalMs: number;
  /** Server-side watch timeout; client-go picks 5-10 min at random so watches do not expire together. */
  readonly watchTimeoutSeconds: () => number;
  readonly backoff: BackoffPolicy;
  readonly random: () => number;
}

export const DEFAULT_KUBE_WATCH_TUNING: KubeWatchTuning = {
  resyncIntervalMs: 5 * 60_000,
  watchTimeoutSeconds: () => 300 + Math.floor(Math.random() * 300),
  backoff: WATCH_BACKOFF,
  random: Math.random,
};

type StreamEnd = 'closed' | 'gone' | 'resync' | 'stopped';

export class KubeWatch implements WatchSubscription {
  readonly #http: KubeHttp;
  readonly #kind: ResourceKind;
  readonly #options: WatchOptions;
  readonly #tuning: KubeWatchTuning;
  readonly #cache = new ObjectCache();
  readonly #stop = new AbortController();
  #stream: AbortController | undefined;
  #resyncDue = false;
  #resourceVersion: string | undefined;
  readonly #done: Promise<void>;
  readonly #resyncTimer: NodeJS.Timeout;

  constructor(http: KubeHttp, kind: ResourceKind, options: WatchOptions, tuning: KubeWatchTuning) {
    this.#http = http;
    this.#kind = kind;
    this.#options = options;
    this.#tuning = tuning;
    this.#resourceVersion = options.resourceVersion;
    this.#resyncTimer = setInterval(() => {
      this.#resyncDue = true;
      this.#stream?.abort();
    }, tuning.resyncIntervalMs);
    this.#resyncTimer.unref();
    this.#done = this.#run();
  }

  #query(): Record<string, string | undefined> {
    return {
      fieldSelector: this.#options.name === undefined ? undefined : `metadata.name=${this.#options.name}`,
      labelSelector: this.#options.labelSelector,
    };
  }

  async #relist(): Promise<void> {
    const path = resourcePath(this.#kind, this.#options.namespace);
    const response = await this.#http.request({ method: 'GET', path, query: this.#query(), signal: this.#stop.signal });
    if (response.status !== 200) throw failure(`list ${path}`, response);
    const body = response.body as { items?: KubeObject[]; metadata?: { resourceVersion?: string } };
    // List items omit apiVersion/kind; restore them so consumers see whole objects.
    const items = (body.items ?? []).map((item) => ({
      ...item,
      apiVersion: this.#kind.apiVersion,
      kind: this.#kind.kind,
    }));
    this.#resourceVersion = body.metadata?.resourceVersion;
    for (const event of this.#cache.replace(items)) {
      if (this.#stop.signal.aborted) return;
      this.#options.onEvent(event);
    }
    if (!this.#stop.signal.aborted) this.#options.onSynced?.(this.#cache.values());
  }

  #restart(reason: WatchRestartReason, error?: Error): void {
    if (!this.#stop.signal.aborted) this.#options.onRestart?.(reason, error);
  }

  async #run(): Promise<void> {
    const backoff = new Backoff(this.#tuning.backoff, this.#tuning.random);
    let needList = this.#resourceVersion === undefined;
    while (!this.#stop.signal.aborted) {
      try {
        if (needList || this.#resyncDue) {
          this.#resyncDue = false;
          await this.#relist();
          needList = false;
        }
        let progressed = false;
        const end = await this.#streamOnce(() => {
          progressed = true;
          backoff.reset();
        });
        if (end === 'stopped') return;
        if (end === 'gone') {
          this.#restart('gone');
          needList = true;
        } else if (end === 'closed') {
          this.#restart('closed');
          // A stream that closes before delivering anything (a proxy cutting idle connections, a server
          // shedding load) must not turn into a reconnect storm.
          if (!progressed) await sleep(backoff.next(), this.#stop.signal);
        }
      } catch (error) {
        if (this.#stop.signal.aborted) return;
        const err = error instanceof Error ? error : new Error(String(error));
        if (err instanceof ResourceStoreError && err.code === 'gone') {
          this.#restart('gone', err);
          needList = true;
          continue;
        }
        this.#restart('error', err);
        await sleep(backoff.next(), this.#stop.signal);
      }
    }
  }

  /** One watch request; resolves with why it ended. Events reset the backoff: the connection worked. */
  async #streamOnce(onProgress: () => void): Promise<StreamEnd> {
    const controller = new AbortController();
    this.#stream = controller;
    const signal = AbortSignal.any([controller.signal, this.#stop.signal]);
    const path = resourcePath(this.#kind, this.#options.namespace);
    const query = {
      ...this.#query(),
      watch: '1',
      allowWatchBookmarks: 'true',
      resourceVersion: this.#resourceVersion,
      timeoutSeconds: String(this.#tuning.watchTimeoutSeconds()),
    };
    try {
      const response = await this.#http.stream({ method: 'GET', path, query, signal });
      if (response.statusCode !== 200) {
        const chunks: Buffer[] = [];
        for await (const chunk of response) chunks.push(chunk as Buffer);
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = undefined;
        }
        throw failure(`watch ${path}`, { status: response.statusCode ?? 0, body });
      }
      response.setEncoding('utf8');
      const lines = new LineSplitter();
      for await (const chunk of response) {
        for (const line of lines.push(chunk as string)) {
          const end = this.#handleLine(line, onProgress);
          if (end !== undefined) {
            response.destroy();
            return end;
          }
        }
      }
      for (const line of lines.flush()) {
        const end = this.#handleLine(line, onProgress);
        if (end !== undefined) return end;
      }
      return 'closed';
    } catch (error) {
      if (this.#stop.signal.aborted) return 'stopped';
      if (controller.signal.aborted) return 'resync';
      throw error;
    } finally {
      this.#stream = undefined;
    }
  }

  #handleLine(line: string, onProgress: () => void): StreamEnd | undefined {
    if (this.#stop.signal.aborted) return 'stopped';
    const action = translateWatchLine(line);
    switch (action.action) {
      case 'event':
        onProgress();
        if (action.resourceVersion !== undefined) this.#resourceVersion = action.resourceVersion;
        if (this.#cache.apply(action.event)) this.#options.onEvent(action.event);
        return undefined;
      case 'bookmark':
        onProgress();
        this.#resourceVersion = action.resourceVersion;
        return undefined;
      case 'gone':
        return 'gone';
      case 'error':
        throw new ResourceStoreError('unavailable', `watch ${this.#kind.kind}: ${action.message}`, {
          statusCode: action.code,
        });
      case 'ignore':
        return undefined;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#resyncTimer);
    this.#stop.abort();
    await this.#done;
  }
}
