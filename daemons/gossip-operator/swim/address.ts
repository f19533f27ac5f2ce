import { isIP } from 'node:net';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** "host:port", with IPv6 literals bracketed ("[::1]:7946"). */
export function formatAddress(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Parses "1.2.3.4:7946", "[::1]:7946" or "name.example:7946"; undefined when malformed. */
export function parseAddress(text: string): HostPort | undefined {
  const s = text.trim();
  let host: string;
  let portText: string;
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0 || s[end + 1] !== ':') return undefined;
    host = s.slice(1, end);
    portText = s.slice(end + 2);
    if (isIP(host) !== 6) return undefined;
  } else {
    const colon = s.lastIndexOf(':');
    if (colon <= 0 || s.indexOf(':') !== colon) return undefined; // bare IPv6 must be bracketed
    host = s.slice(0, colon);
    portText = s.slice(colon + 1);
    if (
      isIP(host) === 0 &&
      !/^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/.test(
        host,
      )
    ) {
      return undefined;
    }
  }
  if (!/^\d{1,5}$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port < 1 || port > 65_535) return undefined;
  return { host, port };
}
