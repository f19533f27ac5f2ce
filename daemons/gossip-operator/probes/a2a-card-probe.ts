/**
 * The AgentToAgentProvider probe: reads the agent's A2A agent card and checks it is one a caller could use.
 *
 * The card is at `{endpoint}/.well-known/agent-card.json` (A2A 0.3 and 1.0); an agent of an earlier revision serves
 * it at `/.well-known/agent.json`, which is tried only when the first path answers 404. The request carries
 * `A2A-Version: 1.0`, as the SDK's own card resolver does: a 1.0 server with v0.3 compatibility on answers a request
 * without it with the v0.3 card, which names fewer interfaces. Both card shapes are read:
 *
 * - 1.0: the interfaces are `supportedInterfaces` [{url, protocolBinding, protocolVersion}], the first preferred;
 * - 0.3 and earlier: one `url` with its `preferredTransport` (JSONRPC when absent) and a card-level
 *   `protocolVersion`, plus `additionalInterfaces` [{url, transport}].
 *
 * A probe either succeeds with the card's name, skills, capabilities and interfaces, or fails naming the path, the
 * failure class and, for a card that is not valid, what is wrong and where (`skills[2].id`). Card text is never
 * quoted into a failure beyond a bounded prefix of a version string.
 */
import { type ProbeFailure, type ProbeTls, joinUrl, probeHttp } from './http-probe.ts';

export interface A2aCardProbeConfig {
  readonly endpoint: string;
  readonly tls?: ProbeTls;
  readonly bearerToken?: string;
  readonly timeoutMs: number;
}

/** The well-known card paths, newest first. */
export const CARD_PATHS = ['/.well-known/agent-card.json', '/.well-known/agent.json'] as const;
export type CardPath = (typeof CARD_PATHS)[number];

/** The revision the probe asks for (A2A-Version); the card's own shape decides how it is read. */
export const REQUESTED_VERSION = '1.0';
/** A card lists skills and interfaces, not data: the largest published cards are tens of KiB. */
export const MAX_CARD_BYTES = 256 * 1024;
export const MAX_SKILLS = 256;
export const MAX_INTERFACES = 16;
/** Skill ids are identities: a longer one is refused, never cut (what status.skills[].id holds). */
export const MAX_SKILL_ID_CHARS = 128;
/** Names and descriptions are for people: kept, cut to these lengths. */
export const MAX_NAME_CHARS = 256;
export const MAX_DESCRIPTION_CHARS = 512;
const MAX_TAGS = 64;
const MAX_URL_CHARS = 2048;
const VERSION = /^\d{1,4}\.\d{1,4}(\.\d{1,4})?$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

export interface A2aSkill {
  readonly id: string;
  readonly name: string;
  readonly description?: string;
}

export interface A2aInterface {
  readonly url: string;
  /** JSONRPC, HTTP+JSON, GRPC or another binding the card names. */
  readonly protocolBinding: string;
  /** Absent when a 0.3 card's additional interface does not say (it shares the card's version). */
  readonly protocolVersion?: string;
}

export interface A2aCard {
  readonly name: string;
  readonly skills: readonly A2aSkill[];
  readonly capabilities: { readonly streaming: boolean; readonly pushNotifications: boolean };
  /** In the card's order; the first is the one the agent prefers. */
  readonly interfaces: readonly A2aInterface[];
  /** The newest revision any interface (or a 0.3 card itself) declares, e.g. "1.0" or "0.3.0". */
  readonly protocolVersion?: string;
  /** Which shape the card has: 1.0 (supportedInterfaces) or 0.3 (url, preferredTransport). */
  readonly shape: '1.0' | '0.3';
}

export type A2aCardProbeResult =
  | { readonly ok: true; readonly card: A2aCard; readonly cardPath: CardPath }
  | {
      readonly ok: false;
      readonly reason: 'http_status' | 'not_found' | 'invalid_card' | ProbeFailure;
      /** The path the failure happened at. */
      readonly cardPath: CardPath;
      /** The HTTP status, for http_status and not_found. */
      readonly status?: number;
      readonly detail: string;
    };

export async function probeAgentCard(config: A2aCardProbeConfig): Promise<A2aCardProbeResult> {
  // One budget for both paths, so a slow first answer cannot double the probe's time.
  const deadline = Date.now() + config.timeoutMs;
  const [newer, older] = CARD_PATHS;
  let cardPath: CardPath = newer;
  let response = await fetchCard(config, cardPath, deadline);
  if (response.ok && response.status === 404) {
    cardPath = older;
    response = await fetchCard(config, cardPath, deadline);
    if (response.ok && response.status === 404) {
      return {
        ok: false,
        reason: 'not_found',
        cardPath,
        status: 404,
        detail: `no agent card: GET ${newer} and GET ${older} both answered HTTP 404`,
      };
    }
  }
  if (!response.ok)
    return { ok: false, reason: response.failure, cardPath, detail: `GET ${cardPath}: ${response.detail}` };
  if (response.status < 200 || response.status > 299) {
    return {
      ok: false,
      reason: 'http_status',
      cardPath,
      status: response.status,
      detail: `GET ${cardPath} answered HTTP ${response.status}`,
    };
  }
  let document: unknown;
  try {
    document = JSON.parse(response.body.toString('utf8'));
  } catch {
    return { ok: false, reason: 'invalid_card', cardPath, detail: `the card at ${cardPath} is not JSON` };
  }
  const card = parseAgentCard(document);
  if (typeof card === 'string')
    return { ok: false, reason: 'invalid_card', cardPath, detail: `the card at ${cardPath}: ${card}` };
  return { ok: true, card, cardPath };
}

function fetchCard(config: A2aCardProbeConfig, cardPath: CardPath, deadline: number): ReturnType<typeof probeHttp> {
  const headers: Record<string, string> = { accept: 'application/json', 'a2a-version': REQUESTED_VERSION };
  if (config.bearerToken !== undefined) headers['authorization'] = `Bearer ${config.bearerToken}`;
  return probeHttp({
    url: joinUrl(config.endpoint, cardPath),
    headers,
    timeoutMs: Math.max(1, deadline - Date.now()),
    maxBytes: MAX_CARD_BYTES,
    ...(config.tls !== undefined ? { tls: config.tls } : {}),
  });
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const text = (value: unknown): value is string => typeof value === 'string' && value.trim() !== '';

/** The card, checked; or what is wrong with it and where, as a string. */
export function parseAgentCard(document: unknown): A2aCard | string {
  if (!isObject(document)) return 'is not a JSON object';
  if (!text(document['name'])) return 'name is missing or not a non-blank string';
  const skills = parseSkills(document['skills']);
  if (typeof skills === 'string') return skills;
  const capabilities = parseCapabilities(document['capabilities']);
  if (typeof capabilities === 'string') return capabilities;
  const shape = document['supportedInterfaces'] !== undefined ? '1.0' : '0.3';
  const interfaces =
    shape === '1.0' ? parseSupportedInterfaces(document['supportedInterfaces']) : parseLegacyInterfaces(document);
  if (typeof interfaces === 'string') return interfaces;
  const versions = interfaces.flatMap((i) => (i.protocolVersion === undefined ? [] : [i.protocolVersion]));
  const protocolVersion = versions.sort(compareVersions).at(-1);
  return {
    name: document['name'].slice(0, MAX_NAME_CHARS),
    skills,
    capabilities,
    interfaces,
    ...(protocolVersion !== undefined ? { protocolVersion } : {}),
    shape,
  };
}

function parseSkills(skills: unknown): A2aSkill[] | string {
  if (!Array.isArray(skills)) return 'skills is missing or not an array';
  if (skills.length > MAX_SKILLS) return `skills lists ${skills.length} skills, more than ${MAX_SKILLS}`;
  const out: A2aSkill[] = [];
  const seen = new Map<string, number>();
  for (const [index, skill] of skills.entries()) {
    const where = `skills[${index}]`;
    if (!isObject(skill)) return `${where} is not an object`;
    const id = skill['id'];
    if (!text(id) || id.length > MAX_SKILL_ID_CHARS || CONTROL.test(id))
      return `${where}.id is missing, blank, longer than ${MAX_SKILL_ID_CHARS} characters or has control characters`;
    const earlier = seen.get(id);
    if (earlier !== undefined) return `${where}.id repeats the id of skills[${earlier}]`;
    seen.set(id, index);
    if (!text(skill['name'])) return `${where}.name is missing or not a non-blank string`;
    const description = skill['description'];
    if (description !== undefined && typeof description !== 'string') return `${where}.description is not a string`;
    const tags = skill['tags'];
    if (
      tags !== undefined &&
      (!Array.isArray(tags) || tags.length > MAX_TAGS || !tags.every((t) => typeof t === 'string'))
    ) {
      return `${where}.tags is not an array of at most ${MAX_TAGS} strings`;
    }
    out.push({
      id,
      name: skill['name'].slice(0, MAX_NAME_CHARS),
      ...(description !== undefined && description !== ''
        ? { description: description.slice(0, MAX_DESCRIPTION_CHARS) }
        : {}),
    });
  }
  return out;
}

function parseCapabilities(capabilities: unknown): A2aCard['capabilities'] | string {
  // Both revisions require the object; a 1.0 server serialising an empty one may leave it out.
  if (capabilities === undefined) return { streaming: false, pushNotifications: false };
  if (!isObject(capabilities)) return 'capabilities is not an object';
  for (const flag of ['streaming', 'pushNotifications'] as const) {
    if (capabilities[flag] !== undefined && typeof capabilities[flag] !== 'boolean')
      return `capabilities.${flag} is not a boolean`;
  }
  return {
    streaming: capabilities['streaming'] === true,
    pushNotifications: capabilities['pushNotifications'] === true,
  };
}

function parseUrl(value: unknown, where: string): string | { problem: string } {
  // 1.0 examples use relative interface URLs (resolved against the card's); only the form is checked here.
  if (!text(value) || value.length > MAX_URL_CHARS || /\s/.test(value))
    return { problem: `${where} is missing, blank, longer than ${MAX_URL_CHARS} characters or has whitespace` };
  return value;
}

function parseVersion(value: unknown, where: string): string | undefined | { problem: string } {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !VERSION.test(value)) {
    return {
      problem: `${where} ${typeof value === 'string' ? JSON.stringify(value.slice(0, 32)) : 'is not a string and'} is not a version like 1.0 or 0.3.0`,
    };
  }
  return value;
}

function parseSupportedInterfaces(list: unknown): A2aInterface[] | string {
  if (!Array.isArray(list) || list.length === 0) return 'supportedInterfaces is not a non-empty array';
  if (list.length > MAX_INTERFACES) return `supportedInterfaces lists more than ${MAX_INTERFACES} interfaces`;
  const out: A2aInterface[] = [];
  for (const [index, entry] of list.entries()) {
    const where = `supportedInterfaces[${index}]`;
    if (!isObject(entry)) return `${where} is not an object`;
    const url = parseUrl(entry['url'], `${where}.url`);
    if (typeof url !== 'string') return url.problem;
    if (!text(entry['protocolBinding']) || entry['protocolBinding'].length > 64)
      return `${where}.protocolBinding is missing or not a short string`;
    const version = parseVersion(entry['protocolVersion'], `${where}.protocolVersion`);
    if (typeof version === 'object') return version.problem;
    if (version === undefined) return `${where}.protocolVersion is missing`;
    out.push({ url, protocolBinding: entry['protocolBinding'], protocolVersion: version });
  }
  return out;
}

function parseLegacyInterfaces(card: Record<string, unknown>): A2aInterface[] | string {
  if (card['url'] === undefined)
    return 'the card names no interface: neither supportedInterfaces (A2A 1.0) nor url (0.3)';
  const url = parseUrl(card['url'], 'url');
  if (typeof url !== 'string') return url.problem;
  const transport = card['preferredTransport'] ?? 'JSONRPC';
  if (!text(transport) || transport.length > 64) return 'preferredTransport is not a short string';
  const version = parseVersion(card['protocolVersion'], 'protocolVersion');
  if (typeof version === 'object') return version.problem;
  const out: A2aInterface[] = [
    { url, protocolBinding: transport, ...(version !== undefined ? { protocolVersion: version } : {}) },
  ];
  const additional = card['additionalInterfaces'] ?? [];
  if (!Array.isArray(additional) || additional.length >= MAX_INTERFACES)
    return `additionalInterfaces is not an array of fewer than ${MAX_INTERFACES} interfaces`;
  for (const [index, entry] of additional.entries()) {
    const where = `additionalInterfaces[${index}]`;
    if (!isObject(entry)) return `${where} is not an object`;
    const extra = parseUrl(entry['url'], `${where}.url`);
    if (typeof extra !== 'string') return extra.problem;
    if (!text(entry['transport']) || entry['transport'].length > 64)
      return `${where}.transport is missing or not a short string`;
    out.push({
      url: extra,
      protocolBinding: entry['transport'],
      ...(version !== undefined ? { protocolVersion: version } : {}),
    });
  }
  return out;
}

/** Numeric order of dotted versions: 0.3.0 < 0.10 < 1.0. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}
