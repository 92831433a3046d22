import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../../core/kernel/errors.ts';
import { ARTIFACT_ROUTE_PREFIX, type ArtifactUrls } from './artifact-urls.ts';
import '../apps-errors.ts';

export interface ArtifactRouteDeps {
  /** The signer, or null where no runtime signs artifact URLs (the `local` provider): every request is then a 404. */
  urls: () => Promise<ArtifactUrls | null>;
  /** The kept artifact folder of a deployment, or null. */
  artifactDirOf: (deploymentId: string) => Promise<string | null>;
}

/**
 * `GET /apps-artifacts/<deployment id>.tar.gz?expires=…&signature=…`: a deployment's artifact as a
 * gzipped tar, streamed, for the kubernetes runtime's init container (artifact-urls.ts). No API key:
 * the signature is the credential. A missing, wrong or expired signature, like an unknown
 * deployment or a pruned artifact, answers 404 `deployment_not_found`: nothing is told to a caller
 * without a valid URL.
 */
export function mountArtifactRoute(app: FastifyInstance, deps: ArtifactRouteDeps): void {
  const open = { config: { auth: false as const, surface: 'root' as const } };
  app.get(`${ARTIFACT_ROUTE_PREFIX}:file`, open, async (request, reply) => {
    const { file } = request.params as { file: string };
    const query = request.query as Record<string, string | undefined>;
    const deploymentId = file.endsWith('.tar.gz') ? file.slice(0, -'.tar.gz'.length) : '';
    const urls = await deps.urls();
    if (!urls || deploymentId === '' || !urls.verify(deploymentId, query['expires'], query['signature'])) {
      throw new ApiError('deployment_not_found');
    }
    const dir = await deps.artifactDirOf(deploymentId);
    const folder = dir ? await stat(dir).catch(() => null) : null;
    if (!dir || !folder?.isDirectory()) throw new ApiError('deployment_not_found');
    const tar = spawn('tar', ['-czf', '-', '-C', dir, '.'], { stdio: ['ignore', 'pipe', 'ignore'] });
    // A client that goes away ends the tar.
    reply.raw.once('close', () => tar.kill('SIGKILL'));
    return reply.type('application/gzip').header('cache-control', 'no-store').send(tar.stdout);
  });
}
