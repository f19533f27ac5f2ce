// Where A2A JSON-RPC names a task, in both generations of the protocol: the 0.3 methods (message/send, tasks/get,
// kind-tagged results) and the 1.0 ones (SendMessage, GetTask, results wrapped as {task}, {statusUpdate}, ...). The
// provider gateway learns which backend replica answered for a task from the answers, and sends the task's later
// requests (get, cancel, resubscribe, a message continuing it) to that replica.
import type { JsonRpcMessage } from './jsonrpc.ts';
import { boundary } from '../usage/usage-tap.ts';

export const A2A_METHODS = new Set([
  'message/send',
  'message/stream',
  'tasks/get',
  'tasks/cancel',
  'tasks/resubscribe',
  'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete',
  'agent/getAuthenticatedExtendedCard',
  'SendMessage',
  'SendStreamingMessage',
  'GetTask',
  'ListTasks',
  'CancelTask',
  'SubscribeToTask',
  'CreateTaskPushNotificationConfig',
  'GetTaskPushNotificationConfig',
  'ListTaskPushNotificationConfigs',
  'DeleteTaskPushNotificationConfig',
  'GetExtendedAgentCard',
]);

/** Methods whose params.id is a task id. */
const BY_ID = new Set(['tasks/get', 'tasks/cancel', 'tasks/resubscribe', 'GetTask', 'CancelTask', 'SubscribeToTask']);
const MAX_TASK_ID_BYTES = 256;

const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value.length > 0 && value.length <= MAX_TASK_ID_BYTES ? value : undefined;
const obj = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/** The task a request is about, if it names one. */
export function requestTaskId(message: JsonRpcMessage): string | undefined {
  const params = message.params;
  if (params === undefined || message.method === undefined) return undefined;
  if (BY_ID.has(message.method)) return str(params['id']);
  return str(obj(params['message'])?.['taskId']) ?? str(params['taskId']);
}

/** The task ids an answer (one JSON-RPC response, or one SSE event's data) speaks for. */
export function answerTaskIds(answer: unknown): string[] {
  const result = obj(obj(answer)?.['result']);
  if (result === undefined) return [];
  const ids: (string | undefined)[] = [];
  // 0.3: a Task is kind "task"; a message or an update carries taskId. 1.0: a bare Task (GetTask) has id and status.
  if (result['kind'] === 'task' || (obj(result['status']) !== undefined && result['kind'] === undefined))
    ids.push(str(result['id']));
  ids.push(str(result['taskId']));
  // 1.0 wraps what it answers: {task}, {message}, {statusUpdate}, {artifactUpdate}.
  ids.push(
    str(obj(result['task'])?.['id']),
    str(obj(result['message'])?.['taskId']),
    str(obj(result['statusUpdate'])?.['taskId']),
    str(obj(result['artifactUpdate'])?.['taskId']),
  );
  return [...new Set(ids.filter((id): id is string => id !== undefined))];
}

/**
 * Reads a response as it streams (JSON, or SSE events) and reports each task id it names. Bounded: past
 * `maxBytes` of one JSON body or one SSE event it stops looking (the bytes still pass through untouched).
 */
export class TaskIdScanner {
  readonly #eventStream: boolean;
  readonly #maxBytes: number;
  readonly #found: (taskId: string) => void;
  #buffer = '';
  #gaveUp = false;

  constructor(contentType: string | undefined, maxBytes: number, found: (taskId: string) => void) {
    this.#eventStream = (contentType ?? '').toLowerCase().startsWith('text/event-stream');
    this.#maxBytes = maxBytes;
    this.#found = found;
  }

  push(chunk: Buffer): void {
    if (this.#gaveUp) return;
    this.#buffer += chunk.toString('utf8');
    if (this.#eventStream) {
      // Events end at a blank line; what follows the last one may be an event still arriving.
      let from = 0;
      for (let b = boundary(this.#buffer, 0); b !== undefined; b = boundary(this.#buffer, from)) {
        this.#event(this.#buffer.slice(from, b.at));
        from = b.at + b.length;
      }
      this.#buffer = this.#buffer.slice(from);
    }
    if (this.#buffer.length > this.#maxBytes) {
      this.#gaveUp = true;
      this.#buffer = '';
    }
  }

  end(): void {
    if (this.#gaveUp) return;
    if (this.#eventStream) this.#event(this.#buffer);
    else this.#json(this.#buffer);
    this.#buffer = '';
  }

  #event(event: string): void {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
      .join('\n');
    if (data !== '') this.#json(data);
  }

  #json(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return;
    }
    for (const answer of Array.isArray(parsed) ? parsed : [parsed])
      for (const id of answerTaskIds(answer)) this.#found(id);
  }
}
