// Seeds (GridNetwork.spec.seeds plus env): literal IPv4, bracketed IPv6 or DNS names, each with a port. Names
// are resolved with a bounded lookup; our own address is filtered out so a lone site never joins itself.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { formatAddress, parseAddress, type HostPort } from './address.ts';

export interface SeedProblem {
  readonly seed: string;
  readonly problem: string;
}

export interface ParsedSeeds {
  readonly seeds: readonly HostPort[];
  readonly problems: readonly SeedProblem[];
}

export function parseSeeds(entries: readonly string[]): ParsedSeeds {
  const seeds: HostPort[] = [];
  const problems: SeedProblem[] = [];
  for (const entry of entries) {
    const hp = parseAddress(entry);
    if (hp) seeds.push(hp);
    else
      problems.push({
        seed: entry,
        problem:
          'expected host:port with an IPv4 address, a bracketed IPv6 address ([::1]:7946) or a DNS name, and a port from 1 to 65535',
      });
  }
  return { seeds, problems };
}

export type LookupFn = (host: string) => Promise<readonly string[]>;

const defaultLookup: LookupFn = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Resolves one name, giving up after `timeoutMs` (getaddrinfo cannot be cancelled, so we stop waiting). */
export async function resolveHost(
  host: string,
  timeoutMs: number,
  lookup: LookupFn = defaultLookup,
): Promise<readonly string[]> {
  if (isIP(host) !== 0) return [host];
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      lookup(host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`DNS lookup of ${host} timed out after ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ResolvedSeeds {
  /** "ip:port" addresses, deduplicated, own address removed. */
  readonly addresses: readonly string[];
  readonly problems: readonly SeedProblem[];
}

/**
 * Parses and resolves seeds. `selfAddresses` are the "ip:port" forms this member is reachable on (its bind and
 * advertised addresses); any seed resolving to one of them is dropped.
 */
export async function resolveSeeds(
  entries: readonly string[],
  selfAddresses: readonly string[],
  timeoutMs: number,
  lookup?: LookupFn,
): Promise<ResolvedSeeds> {
  const parsed = parseSeeds(entries);
  const problems: SeedProblem[] = [...parsed.problems];
  const self = new Set(selfAddresses.map((a) => normalise(a)));
  const out = new Set<string>();
  await Promise.all(
    parsed.seeds.map(async (seed) => {
      try {
        for (const ip of await resolveHost(seed.host, timeoutMs, lookup)) {
          const addr = formatAddress(ip, seed.port);
          if (!self.has(normalise(addr))) out.add(addr);
        }
      } catch (err) {
        problems.push({
          seed: formatAddress(seed.host, seed.port),
          problem: err instanceof Error ? err.message : String(err),
        });
      }
    }),
  );
  return { addresses: [...out].sort(), problems };
}

function normalise(addr: string): string {
  const hp = parseAddress(addr);
  return hp ? formatAddress(hp.host.toLowerCase(), hp.port) : addr;
}

/**
 * Which seed problems are worth a log line: the operator re-announces its seeds on every GridNetwork reconcile, so
 * an unresolvable seed would otherwise be logged every time. A problem is reported when a seed first fails or fails
 * differently; a seed that resolves is forgotten, so failing again is reported again.
 */
export class SeedProblemMemory {
  #last = new Map<string, string>();

  changed(problems: readonly SeedProblem[]): SeedProblem[] {
    const next = new Map(problems.map((p) => [p.seed, p.problem]));
    const out = problems.filter((p) => this.#last.get(p.seed) !== p.problem);
    this.#last = next;
    return out;
  }
}
