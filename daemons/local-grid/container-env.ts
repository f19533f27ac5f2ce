/**
 * A compiled container's `env` list as its process's environment, the way the kubelet builds it: in list order, the
 * downward API's fields filled in (namespace, pod name, node name), `$(NAME)` references to earlier variables
 * expanded, and then the local meaning of addresses and paths (rewriteValue). The OpenTelemetry variables name a
 * collector outside the grid, so they are passed as compiled: nothing of the grid's address table applies to them.
 */
import { hostname } from 'node:os';
import type { ContainerSpec, PodPlan } from './compiled-grid.ts';
import { rewriteValue, type RewriteContext } from './rewrite.ts';

/** Expanded like every other variable, never rewritten (OTEL_EXPORTER_OTLP_ENDPOINT is a collector's URL). */
const PASSED_AS_COMPILED = /^OTEL_/u;

/**
 * Kubernetes' expansion of an env value (k8s.io/kubernetes third_party/forked/golang/expansion): `$(NAME)` becomes
 * the value of NAME when it is defined earlier, and stays as written otherwise; `$$` is an escaped `$`; any other
 * `$` is kept.
 */
export function expandReferences(value: string, defined: Readonly<Record<string, string>>): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const char = value[i];
    if (char !== '$' || i + 1 >= value.length) {
      out += char;
      continue;
    }
    const next = value[i + 1];
    if (next === '$') {
      out += '$';
      i++;
    } else if (next === '(') {
      const close = value.indexOf(')', i + 2);
      if (close < 0) {
        out += value.slice(i);
        break;
      }
      const name = value.slice(i + 2, close);
      out += Object.hasOwn(defined, name) ? defined[name] : `$(${name})`;
      i = close;
    } else {
      out += char;
    }
  }
  return out;
}

/** The value the downward API gives a fieldRef, or undefined for a field the local grid cannot provide. */
function fieldValue(fieldPath: string | undefined, pod: PodPlan): string | undefined {
  switch (fieldPath) {
    case 'metadata.namespace':
      return pod.namespace;
    case 'metadata.name':
      return pod.id;
    // Every local pod runs on this machine.
    case 'spec.nodeName':
      return hostname();
    default:
      return undefined;
  }
}

/** The environment of one container's process, and the variables it could not give a value. */
export function containerEnv(
  container: ContainerSpec,
  pod: PodPlan,
  ctx: RewriteContext,
): { vars: Record<string, string>; problems: string[] } {
  const vars: Record<string, string> = {};
  const problems: string[] = [];
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      const expanded = expandReferences(variable.value, vars);
      vars[variable.name] = PASSED_AS_COMPILED.test(variable.name) ? expanded : rewriteValue(expanded, ctx);
      continue;
    }
    const field = fieldValue(variable.valueFrom?.fieldRef?.fieldPath, pod);
    if (field !== undefined) vars[variable.name] = field;
    else problems.push(`${pod.id}/${container.name}: env ${variable.name} has a source the local grid cannot provide`);
  }
  return { vars, problems };
}
