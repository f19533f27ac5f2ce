// The gateway's ServerResponse (its listeners' `ServerResponse` option): every head it writes carries the headers the
// gateway adds to a response, whoever writes it (the load balancer, an error answer, /v1/models, or Node's implicit
// head): the request's id (x-request-id), intelligent_route's site (x-agn-routed-site), and any a filter adds
// (grid_site_route's site and backend, budget_enforce's rate limits). They are kept here and added to the head rather
// than set per request with setHeader: a header set beforehand makes Node pass every upstream header through setHeader
// again inside writeHead (7 300 and 8 200 instructions per request in two runs of bench:gateway-instructions).
import { ServerResponse } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders } from 'node:http';
import { RESPONSE_REQUEST_ID_HEADER, RESPONSE_ROUTED_SITE_HEADER } from './hop-headers.ts';

type Headers = OutgoingHttpHeaders | OutgoingHttpHeader[];

export class GatewayResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  /** This request's id, set by the server as the request arrives; empty for a response it never handled. */
  requestId = '';
  /**
   * The site of the candidate intelligent_route selected, answered as x-agn-routed-site. A field, as the request id is,
   * because it is set on every routed request; GatewayRequest.routedSite is the site for accounting, which
   * grid_site_route sets too (it answers its own x-grid-site instead).
   */
  routedSite: string | undefined = undefined;
  /** Other headers a filter added for this head (lowercase names), made on the first. */
  #added: Record<string, string> | undefined = undefined;

  /** Adds a header to this response's head, whichever answer is written (the last value given for a name wins). */
  addHeader(name: string, value: string): void {
    (this.#added ??= {})[name] = value;
  }

  // The headers object given is completed in place: every caller passes one it built for this head.
  override writeHead(statusCode: number, statusMessage?: string, headers?: Headers): this;
  override writeHead(statusCode: number, headers?: Headers): this;
  override writeHead(statusCode: number, messageOrHeaders?: string | Headers, headers?: Headers): this {
    if (typeof messageOrHeaders === 'string')
      return super.writeHead(statusCode, messageOrHeaders, this.#withOwn(headers));
    return super.writeHead(statusCode, this.#withOwn(messageOrHeaders));
  }

  #withOwn(headers: Headers | undefined): Headers | undefined {
    if (this.requestId === '') return headers;
    if (Array.isArray(headers)) {
      // Node's flat form: name, value, name, value.
      const own: OutgoingHttpHeader[] = [RESPONSE_REQUEST_ID_HEADER, this.requestId];
      if (this.routedSite !== undefined) own.push(RESPONSE_ROUTED_SITE_HEADER, this.routedSite);
      for (const name in this.#added) own.push(name, this.#added[name]!);
      return [...headers, ...own];
    }
    const out = headers ?? {};
    out[RESPONSE_REQUEST_ID_HEADER] = this.requestId;
    if (this.routedSite !== undefined) out[RESPONSE_ROUTED_SITE_HEADER] = this.routedSite;
    for (const name in this.#added) out[name] = this.#added[name]!;
    return out;
  }
}
