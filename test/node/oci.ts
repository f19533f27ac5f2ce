// A one-layer OCI image archive around a static binary (the pod sandbox's pause program): what `ctr images import`
// reads. The upstream pause image comes from registry.k8s.io, which this machine does not reach; this one is built
// from test/node/images/pause by build-node.sh and packed here. Deterministic: sorted entries, owner root, mtime 0.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function tar(dir: string, out: string): void {
  execFileSync('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mtime=@0',
    '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
    '-C',
    dir,
    '-cf',
    out,
    '.',
  ]);
}

function blob(blobs: string, data: Buffer): { digest: string; size: number } {
  const hex = createHash('sha256').update(data).digest('hex');
  writeFileSync(join(blobs, hex), data);
  return { digest: `sha256:${hex}`, size: data.length };
}

/** Writes `out`: an OCI archive whose only layer holds `binary` at /<name>, run as the entrypoint, named `reference`. */
export function binaryImageArchive(binary: string, name: string, reference: string, out: string): void {
  const work = mkdtempSync(join(tmpdir(), 'agn-node-oci-'));
  try {
    const rootfs = join(work, 'rootfs');
    mkdirSync(rootfs);
    copyFileSync(binary, join(rootfs, name));
    chmodSync(join(rootfs, name), 0o755);
    tar(rootfs, join(work, 'layer.tar'));
    const layerData = readFileSync(join(work, 'layer.tar'));
    const layout = join(work, 'oci');
    const blobs = join(layout, 'blobs', 'sha256');
    mkdirSync(blobs, { recursive: true });
    const layer = blob(blobs, layerData);
    const config = blob(
      blobs,
      Buffer.from(
        JSON.stringify({
          architecture: 'amd64',
          os: 'linux',
          config: { Entrypoint: [`/${name}`], User: '65535:65535' },
          rootfs: { type: 'layers', diff_ids: [layer.digest] },
        }),
      ),
    );
    const manifest = blob(
      blobs,
      Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
          layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
        }),
      ),
    );
    writeFileSync(
      join(layout, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifest,
            platform: { architecture: 'amd64', os: 'linux' },
            annotations: { 'org.opencontainers.image.ref.name': reference },
          },
        ],
      }),
    );
    writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    tar(layout, out);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
