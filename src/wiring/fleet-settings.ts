import type { Config } from '../config.js';
import type { FleetSettings } from '../engine/fleet-settings.js';

/** The fleet's slice of the configuration. */
export function fleetSettings(config: Config): FleetSettings {
  return {
    dataDir: config.dataDir,
    fleetFile: config.fleetFile,
    models: config.models,
    engine: config.engine,
    images: {
      ...(config.images.buckets ? { allowed: new Set(config.images.buckets) } : {}),
      ...(config.blobStore ? { ownBucket: config.blobStore.bucket } : {}),
      virtualHostedEndpoint: config.s3.endpoint !== undefined && !config.s3.forcePathStyle,
      maxBytes: config.images.maxBytes,
      fetchConcurrency: config.images.fetchConcurrency,
      defaultRegion: config.s3.region ?? 'us-east-1',
    },
    // The AWS SDK loads only when a request names an s3:// image.
    s3Client: async (region) => (await import('../platform/s3-client.js')).createS3Client({ ...config.s3, region }),
  };
}
