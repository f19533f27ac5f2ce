// Turns one line of a Kubernetes watch stream (`{"type": …, "object": …}`, newline-delimited JSON) into what
// the watch loop must do. Pure, so the protocol rules are tested without an API server.

import type { KubeObject, WatchEvent } from './types.ts';

export type WatchLineAction =
  | { readonly action: 'event'; readonly event: WatchEvent; readonly resourceVersion: string | undefined }
  /** Progress marker (allowWatchBookmarks): only the resourceVersion moves. */
  | { readonly action: 'bookmark'; readonly resourceVersion: string }
  /** 410: the resourceVersion is older than the server's history; the caller must relist. */
  | { readonly action: 'gone'; readonly message: string }
  /** Any other in-stream error Status: reconnect with backoff, resuming from the last resourceVersion. */
  | { readonly action: 'error'; readonly code: number | undefined; readonly message: string }
  | { readonly action: 'ignore'; readonly message: string };

const MAX_MESSAGE = 200;

function bounded(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function translateWatchLine(line: string): WatchLineAction {
  if (line.trim() === '') return { action: 'ignore', message: 'empty line' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return { action: 'ignore', message: `watch line is not JSON: ${bounded(line)}` };
  }
  if (!isObject(parsed) || typeof parsed['type'] !== 'string' || !isObject(parsed['object'])) {
    return { action: 'ignore', message: 'watch line has no type/object' };
  }
  const type = parsed['type'];
  const object = parsed['object'];
  const metadata = isObject(object['metadata']) ? object['metadata'] : {};
  const resourceVersion = typeof metadata['resourceVersion'] === 'string' ? metadata['resourceVersion'] : undefined;
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      if (typeof metadata['name'] !== 'string')
        return { action: 'ignore', message: `${type} event without metadata.name` };
      return { action: 'event', event: { type, object: object as unknown as KubeObject }, resourceVersion };
    case 'BOOKMARK':
      return resourceVersion === undefined
        ? { action: 'ignore', message: 'BOOKMARK without resourceVersion' }
        : { action: 'bookmark', resourceVersion };
    case 'ERROR': {
      const code = typeof object['code'] === 'number' ? object['code'] : undefined;
      const message = bounded(typeof object['message'] === 'string' ? object['message'] : 'watch error');
      // Older servers report an expired resourceVersion as reason Expired without code 410.
      if (code === 410 || object['reason'] === 'Expired' || object['reason'] === 'Gone')
        return { action: 'gone', message };
      return { action: 'error', code, message };
    }
    default:
      return { action: 'ignore', message: `unknown watch event type ${bounded(type)}` };
  }
}

/** Splits a byte stream into lines across chunk boundaries. */
export class LineSplitter {
  #rest = '';

  push(chunk: string): string[] {
    const text = this.#rest + chunk;
    const lines = text.split('\n');
    this.#rest = lines.pop() ?? '';
    return lines;
  }

  flush(): string[] {
    const rest = this.#rest;
    this.#rest = '';
    return rest === '' ? [] : [rest];
  }
}
