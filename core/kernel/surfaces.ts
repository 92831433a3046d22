import { defineContributionPoint } from './extension-points.ts';

/**
 * A surface a plugin serves beyond the kernel's own, advertised by `GET /` under `name` (for
 * example the oauth plugin's `connectorMcp`, `{auth_url}/mcp`, on another host name). `url` is a
 * path on this host or an absolute URL when the surface lives on another.
 */
export interface AdvertisedSurface {
  readonly name: string;
  readonly url: string;
}

export const SurfacesPoint = defineContributionPoint<AdvertisedSurface>('service.surfaces');
