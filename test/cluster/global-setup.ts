// vitest globalSetup for the cluster suite: one control plane for the whole run, shared by every test file
// through `inject('kubeconfigPath')`. Test files isolate themselves by namespace.
import type { TestProject } from 'vitest/node';
import { startControlPlane } from './control-plane.ts';
import type { ControlPlane } from './control-plane.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfigPath: string;
    apiServerUrl: string;
    caPem: string;
  }
}

let plane: ControlPlane | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const startedAt = Date.now();
  plane = await startControlPlane({ keepWorkDir: process.env.AGN_CLUSTER_KEEP_WORKDIR === '1' });
  const { etcd, apiserver } = plane.pids();
  console.log(
    `control plane ready in ${Date.now() - startedAt} ms: ${plane.server} (etcd pid ${etcd}, kube-apiserver pid ${apiserver})`,
  );
  project.provide('kubeconfigPath', plane.kubeconfigPath);
  project.provide('apiServerUrl', plane.server);
  project.provide('caPem', plane.caPem);
  return async () => {
    await plane?.stop();
    plane = undefined;
  };
}
