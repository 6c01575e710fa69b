import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config.js';
import { fetchMiniLmFiles } from '../../src/engine/embeddings/minilm-files.js';
import { type KafkaBroker, startKafkaBroker } from './kafka-broker.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A real S3-compatible server (s3rver) on 127.0.0.1, started for this test run. */
    s3Endpoint: string;
    s3Bucket: string;
    /** host:port of a real Apache Kafka broker on 127.0.0.1 started for this test run, or KAFKA_BROKERS when set. */
    kafkaBrokers: string;
  }
}

export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/**
 * Starts what the suites talk to over real connections: an S3-compatible server and an Apache
 * Kafka broker, both on loopback. KAFKA_BROKERS names a running cluster to use instead. Fetches
 * the built-in embedding model into MODELS_DIR's default (once; Maven, as for the broker), so
 * that the services the tests start find it there rather than each fetching it.
 */
export default async function setup(project: TestProject) {
  const directory = mkdtempSync(join(tmpdir(), 'spool-s3-'));
  const bucket = 'spool-test';
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  const externalKafka = process.env.KAFKA_BROKERS || undefined;
  const kafkaDir = externalKafka ? undefined : mkdtempSync(join(tmpdir(), 'spool-kafka-'));

  // The JVM takes seconds to start; s3rver starts meanwhile.
  const [s3, kafka, model] = await Promise.allSettled([server.run(), kafkaDir ? startKafkaBroker({ dir: kafkaDir }) : Promise.resolve(undefined), fetchMiniLmFiles(loadConfig({}).models.dir)]);
  const broker: KafkaBroker | undefined = kafka.status === 'fulfilled' ? kafka.value : undefined;
  const removeDirectories = () => {
    rmSync(directory, { recursive: true, force: true });
    if (kafkaDir) rmSync(kafkaDir, { recursive: true, force: true });
  };
  if (s3.status === 'rejected' || kafka.status === 'rejected' || model.status === 'rejected') {
    await Promise.all([s3.status === 'fulfilled' ? server.close().catch(() => {}) : undefined, broker?.kill()]);
    removeDirectories();
    throw ([s3, kafka, model].find((result) => result.status === 'rejected') as PromiseRejectedResult).reason;
  }

  project.provide('s3Endpoint', `http://127.0.0.1:${s3.value.port}`);
  project.provide('s3Bucket', bucket);
  project.provide('kafkaBrokers', externalKafka ?? (broker as KafkaBroker).brokers);
  return async () => {
    await Promise.all([server.close(), broker?.stop()]);
    removeDirectories();
  };
}
